package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// Raft's lines come through at their own level, without hclog's
// timestamp, and a repeating line is written once per window with the
// count held back.
func TestRaftLogLines(t *testing.T) {
	var out bytes.Buffer
	h := newHCLog("raft", slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})))
	for i := range 5 {
		h.Error("failed to appendEntries to", "peer", "n2", "attempt", i)
	}
	h.Info("entering follower state", "node", "n1")
	h.Debug("not shown")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	if !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "raft: failed to appendEntries to") ||
		strings.Count(lines[0], "time=") != 1 {
		t.Fatalf("error line: %s", lines[0])
	}
	if !strings.Contains(lines[1], "level=INFO") {
		t.Fatalf("info line: %s", lines[1])
	}
}
