//go:build linux

package commands

import (
	"os"
	"strconv"
	"strings"
)

// processRSS is the process' resident set size in bytes, from
// /proc/self/statm: what the operator pays, heap, off-heap and runtime
// alike. ok is false when it cannot be read.
func processRSS() (rss uint64, ok bool) { return statmPages(1) }

// ProcessFileRSS is the resident set's file-backed part (statm's shared
// pages: the binary's text and data, mapped files): memory that is
// neither the Go heap nor the keyspace's, which the server's Go memory
// limit leaves room for.
func ProcessFileRSS() (uint64, bool) { return statmPages(2) }

// statmPages reads field i of /proc/self/statm (pages), in bytes.
func statmPages(i int) (uint64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) <= i {
		return 0, false
	}
	pages, err := strconv.ParseUint(f[i], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * uint64(os.Getpagesize()), true
}
