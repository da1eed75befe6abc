//go:build !linux

package commands

// processRSS is unknown here; INFO memory falls back to an estimate.
func processRSS() (uint64, bool) { return 0, false }

// ProcessFileRSS is the resident set's file-backed part where it can be
// read (Linux); elsewhere 0, false.
func ProcessFileRSS() (uint64, bool) { return 0, false }
