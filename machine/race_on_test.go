//go:build race

package machine

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// applies that take pooled scratch allocate now and then.
const raceEnabled = true
