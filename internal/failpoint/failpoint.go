// Package failpoint injects faults at named points of the server, for the
// robustness suite (docs/robustness.md): a crash at a chosen instant — a
// process killed between two steps no nemesis from outside can aim at —
// an error where a disk or a call could fail, a delay.
//
// Points are set only in a binary built with -tags failpoints, whose
// --failpoints flag cmd/sluice turns into a *Points (Parse); every other
// binary has no such flag, and a nil *Points — the one components hold
// then — injects nothing. Components take it in their Config, as any
// other dependency; a point is one call, Hit, where the fault belongs.
package failpoint

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The points, by name.
const (
	// CancelPart: the coordinator of a check across groups is about to
	// send the cancel of a part (a refused or failed check's).
	CancelPart = "crossgroup-cancel-part"
	// LogAppendBefore and LogAppendAfter: a node is about to write Raft
	// entries to its log, or has written (and synced) them and not yet
	// told Raft.
	LogAppendBefore = "raftlog-before-append"
	LogAppendAfter  = "raftlog-after-append"
	// LogWrite: a node writes Raft entries to its log — where a write or
	// an fsync fails, or the disk is full (its action: error). The place
	// of LogAppendBefore, armed apart so a run both crashes and fails
	// writes there.
	LogWrite = "raftlog-write"
	// SnapshotClose: a snapshot is written and about to be made durable
	// and named (its sink's Close): a crash leaves it half made, an error
	// drops it.
	SnapshotClose = "snapshot-before-close"
	// WallClock: the wall clock a new leader reads when it takes over (to
	// move a log that fell behind forward). Its action, offset-from-<file>,
	// adds the duration the file holds (as time.ParseDuration reads it;
	// none while the file is missing or empty): a clock stepped on one
	// member, as the suite writes the file.
	WallClock = "wall-clock"
	// ApplyTrace: a member applies a committed entry. Its action,
	// append-to-<file>, injects nothing: it writes a line per command
	// applied (the entry's index and stamp, the words, the reply's start)
	// to the file, so a run's report can show what the log did to a key
	// whose answers do not add up.
	ApplyTrace = "apply-trace"
)

var known = []string{CancelPart, LogAppendBefore, LogAppendAfter, LogWrite, SnapshotClose, WallClock, ApplyTrace}

// ErrInjected is the error an "error" point returns.
var ErrInjected = errors.New("failpoint: injected error")

// ErrSpec: a --failpoints value that does not parse.
var ErrSpec = errors.New("failpoint: bad spec")

// Points are the armed points and what each does. The zero of *Points
// (nil) arms none.
type Points struct {
	armed map[string]action
}

type action struct {
	// kind is crash, error, sleep, offset or append.
	kind string
	// after delays a crash (the caller waits, never to go on; the rest
	// of the process runs meanwhile: a crash a moment after the point,
	// once what runs beside it has) or is a sleep's length.
	after time.Duration
	// chance is the probability the point fires on a hit, in (0, 1].
	chance float64
	// file is an offset's file (kind offset) or the file appended to
	// (kind append).
	file string
}

// Parse reads points: "name=action[@chance]" separated by commas, where
// action is crash, crash-after-<duration>, error or sleep-<duration>, and
// chance the probability a hit fires (default 1). Unknown names are
// refused.
func Parse(spec string) (*Points, error) {
	p := &Points{armed: map[string]action{}}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, rest, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%w: %q: want name=action[@chance]", ErrSpec, item)
		}
		if !isKnown(name) {
			return nil, fmt.Errorf("%w: no point %q (points: %s)", ErrSpec, name, strings.Join(known, ", "))
		}
		a := action{chance: 1}
		if what, chance, ok := strings.Cut(rest, "@"); ok {
			c, err := strconv.ParseFloat(chance, 64)
			if err != nil || c <= 0 || c > 1 {
				return nil, fmt.Errorf("%w: %q: a chance is in (0, 1]", ErrSpec, item)
			}
			a.chance, rest = c, what
		}
		switch {
		case rest == "crash", rest == "error":
			a.kind = rest
		case strings.HasPrefix(rest, "offset-from-") && len(rest) > len("offset-from-"):
			a.kind, a.file = "offset", strings.TrimPrefix(rest, "offset-from-")
		case strings.HasPrefix(rest, "append-to-") && len(rest) > len("append-to-"):
			a.kind, a.file = "append", strings.TrimPrefix(rest, "append-to-")
		case strings.HasPrefix(rest, "crash-after-"), strings.HasPrefix(rest, "sleep-"):
			kind, d, _ := strings.Cut(rest, "-after-")
			if kind != "crash" {
				kind, d, _ = strings.Cut(rest, "-")
			}
			dur, err := time.ParseDuration(d)
			if err != nil || dur <= 0 {
				return nil, fmt.Errorf("%w: %q: a duration such as 50ms", ErrSpec, item)
			}
			a.kind, a.after = kind, dur
		default:
			return nil, fmt.Errorf("%w: %q: actions are crash, crash-after-<d>, error, sleep-<d>, offset-from-<file>, append-to-<file>", ErrSpec, item)
		}
		p.armed[name] = a
	}
	return p, nil
}

func isKnown(name string) bool {
	for _, k := range known {
		if k == name {
			return true
		}
	}
	return false
}

// Armed reports whether point name is armed.
func (p *Points) Armed(name string) bool {
	if p == nil {
		return false
	}
	_, ok := p.armed[name]
	return ok
}

// AppendTo is the file point name is armed to append to
// (append-to-<file>), or "".
func (p *Points) AppendTo(name string) string {
	if p == nil {
		return ""
	}
	if a, ok := p.armed[name]; ok && a.kind == "append" {
		return a.file
	}
	return ""
}

// Offset is the duration point name's offset file holds now (0: the point
// is not armed with offset-from-<file>, or the file is missing, empty or
// not a duration).
func (p *Points) Offset(name string) time.Duration {
	if p == nil {
		return 0
	}
	a, ok := p.armed[name]
	if !ok || a.kind != "offset" {
		return 0
	}
	b, err := os.ReadFile(a.file)
	if err != nil {
		return 0
	}
	d, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return d
}

// Hit is the point name reached: nil unless it is armed and fires — then
// the process is killed (SIGKILL, as kill -9: no deferred work runs), at
// once or after the caller waited a moment, or ErrInjected is returned,
// or the caller sleeps.
func (p *Points) Hit(name string) error {
	if p == nil {
		return nil
	}
	a, ok := p.armed[name]
	if !ok || (a.chance < 1 && rand.Float64() >= a.chance) {
		return nil
	}
	switch a.kind {
	case "crash":
		time.Sleep(a.after)
		crash(name)
	case "error":
		return fmt.Errorf("%w at %s", ErrInjected, name)
	case "sleep":
		time.Sleep(a.after)
	}
	return nil
}

// crash kills the process as kill -9 would, saying where first.
func crash(name string) {
	fmt.Fprintf(os.Stderr, "failpoint %s: crashing\n", name)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
