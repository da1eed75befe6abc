package cluster

import (
	"fmt"
	"os"
	"strconv"

	"github.com/sluice-rl/sluice/internal/failpoint"
)

// applyTrace writes a line per command this member applies, for the
// robustness suite (failpoint.ApplyTrace): when a key's answers do not add
// up, the report shows each entry that touched it — index, stamp, the
// proposing process and its entry, the words and the reply's start — from
// every member's file, so an entry no answer accounts for can be named.
// Only a binary built with -tags failpoints arms it; it decides nothing.
type applyTrace struct {
	f   *os.File
	buf []byte
}

// openApplyTrace opens the file points arm failpoint.ApplyTrace to append
// to, or returns nil when it is not armed. Its first line names the member
// and this process's proposer id (a restart is a new one).
func openApplyTrace(points *failpoint.Points, self string, proposer uint64) (*applyTrace, error) {
	name := points.AppendTo(failpoint.ApplyTrace)
	if name == "" {
		return nil, nil
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: the apply trace: %w", err)
	}
	t := &applyTrace{f: f}
	t.buf = fmt.Appendf(t.buf, "# member %s proposer %x\n", self, proposer)
	t.flush()
	return t, nil
}

// Clipped lengths: a word, and a reply's start.
const (
	traceWord  = 96
	traceReply = 120
)

// command adds the line of one command of the entry at index.
func (t *applyTrace) command(index uint64, stamp int64, prop Proposal, args [][]byte, reply []byte) {
	b := strconv.AppendUint(t.buf, index, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, stamp, 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, prop.Proposer, 16)
	b = append(b, '/')
	b = strconv.AppendUint(b, prop.Seq, 10)
	for _, a := range args {
		b = append(b, ' ')
		b = strconv.AppendQuote(b, string(a[:min(len(a), traceWord)]))
	}
	b = append(b, " -> "...)
	b = strconv.AppendQuote(b, string(reply[:min(len(reply), traceReply)]))
	t.buf = append(b, '\n')
}

// flush writes the entry's lines (one write: a crash loses at most the
// entry being applied).
func (t *applyTrace) flush() {
	if len(t.buf) > 0 {
		t.f.Write(t.buf)
		t.buf = t.buf[:0]
	}
}

func (t *applyTrace) close() {
	if t != nil {
		t.f.Close()
	}
}
