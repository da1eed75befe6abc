//go:build !linux

package commands

// processRSS is unknown here; INFO memory falls back to an estimate.
func processRSS() (uint64, bool) { return 0, false }
