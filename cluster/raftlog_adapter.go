package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Raft and raft-wal log through hclog. Their lines reach the server's log
// through slog at their own level, without hclog's timestamp (slog writes
// one), and a line that repeats — Raft retries an unreachable peer several
// times a second — is written once per repeatWindow, with how many times
// it was held back.

// repeatWindow is how often one kind of line is written at most.
const repeatWindow = 10 * time.Second

// newHCLog is an hclog.Logger named name writing to log.
func newHCLog(name string, log *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Info, DisableTime: true,
		Output: &slogWriter{l: log, seen: map[string]*repeat{}}})
}

// slogWriter turns hclog's lines ("[WARN]  raft: message: k=v …") into
// slog records.
type slogWriter struct {
	l    *slog.Logger
	mu   sync.Mutex
	seen map[string]*repeat
}

type repeat struct {
	last time.Time
	held int
}

var hclogLevels = []struct {
	tag   string
	level slog.Level
}{
	{"[ERROR]", slog.LevelError}, {"[WARN]", slog.LevelWarn}, {"[INFO]", slog.LevelInfo},
	{"[DEBUG]", slog.LevelDebug}, {"[TRACE]", slog.LevelDebug},
}

func (w *slogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelWarn
	for _, l := range hclogLevels {
		if rest, ok := bytes.CutPrefix(line, []byte(l.tag)); ok {
			level, line = l.level, bytes.TrimSpace(rest)
			break
		}
	}
	if !w.l.Enabled(context.Background(), level) {
		return len(p), nil
	}
	// A line's kind is its text before the first key=value.
	kind := string(line)
	if i := bytes.IndexByte(line, '='); i > 0 {
		if j := bytes.LastIndexByte(line[:i], ' '); j > 0 {
			kind = string(line[:j])
		}
	}
	now := time.Now()
	w.mu.Lock()
	r := w.seen[kind]
	if r == nil {
		if len(w.seen) > 1024 { // bounded: kinds are few; forget them all if not
			clear(w.seen)
		}
		r = &repeat{}
		w.seen[kind] = r
	}
	if !r.last.IsZero() && now.Sub(r.last) < repeatWindow {
		r.held++
		w.mu.Unlock()
		return len(p), nil
	}
	held := r.held
	r.last, r.held = now, 0
	w.mu.Unlock()
	if held > 0 {
		w.l.Log(context.Background(), level, string(line), "repeated", held)
	} else {
		w.l.Log(context.Background(), level, string(line))
	}
	return len(p), nil
}
