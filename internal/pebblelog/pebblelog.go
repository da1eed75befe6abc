// Package pebblelog sends Pebble's logs to slog, for the two stores that
// open a Pebble database (persist's quotas and snapshots, raftlog's Raft
// log): its routine messages at debug level, so sluice's own log stays
// readable.
package pebblelog

import (
	"fmt"
	"log/slog"
)

// Logger is a pebble.Logger writing to an slog.Logger.
type Logger struct{ Log *slog.Logger }

// Infof logs Pebble's routine messages (flushes, compactions) at debug.
func (l Logger) Infof(format string, args ...any) {
	l.Log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

// Errorf logs Pebble's errors.
func (l Logger) Errorf(format string, args ...any) {
	l.Log.Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf is called when Pebble cannot continue safely; Pebble's own logger
// exits the process. Panicking does the same and leaves a stack trace.
func (l Logger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	l.Log.Error(msg)
	panic(msg)
}
