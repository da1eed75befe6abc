package pebblelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

var _ pebble.Logger = Logger{}

// Routine messages at debug, errors at error, and a fatal one panics
// after it is logged.
func TestLevels(t *testing.T) {
	var b bytes.Buffer
	l := Logger{slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	l.Infof("flushed %d", 1)
	if b.Len() != 0 {
		t.Fatalf("a routine message at info: %s", b.String())
	}
	l.Errorf("bad %s", "sst")
	if !strings.Contains(b.String(), "level=ERROR") || !strings.Contains(b.String(), "pebble: bad sst") {
		t.Fatalf("an error: %s", b.String())
	}
	defer func() {
		if r := recover(); r != "pebble: gone" || !strings.Contains(b.String(), "pebble: gone") {
			t.Fatalf("fatal: recovered %v, logged %s", r, b.String())
		}
	}()
	l.Fatalf("gone")
}
