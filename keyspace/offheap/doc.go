// Package offheap hands out byte blocks from memory mapped outside the Go
// heap, for the keyspace's record arenas and index arrays.
//
// Why: a keyspace of a million keys is tens of megabytes of pointer-free
// bytes that live for hours. On the Go heap the garbage collector lets the
// heap grow to about twice its live size between cycles (GOGC), so the
// process pays for every byte of state twice in RSS. Memory mapped here is
// invisible to the collector: it is neither scanned nor doubled, and it
// goes back to the operating system (madvise) when it is freed.
//
// Blocks of up to MaxSmall bytes come from size classes (rounded up by
// less than 16 bytes below 128, by at most 12.5% above) carved out of
// fixed-size spans;
// a span whose blocks are all free gives its pages back and can serve any
// class later. Larger blocks are mapped one by one, rounded to the page,
// and unmapped when freed.
//
// The memory is manual: a block must be freed exactly once, and nothing
// may use it after that. A Heap's blocks all go when it is closed.
package offheap
