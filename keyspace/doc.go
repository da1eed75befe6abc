// Package keyspace holds sluice's live state: typed limiter values in
// in-memory tables sharded by Redis Cluster hash slot, with expiry.
//
// Each of the 16384 slots has its own lock and its own table, so keys that
// share a {hash tag} share a slot and can be read and changed together under
// one lock, and slots can later move between nodes whole.
//
// A slot's table keeps its records in one pointer-free byte arena (kind, key,
// a 64-bit word) indexed by an open-addressing array of offsets. A GCRA key
// costs its key bytes plus about 20 bytes, updates in place never allocate,
// and the garbage collector never scans the arena. A state of a few bytes
// (window counters, quotas, a few leases, a short sliding log) can live in
// the record itself (InsertState); larger states (long logs, many leases)
// are objects kept by pointer beside the arena.
//
// Time is a parameter: callers lock a slot at an instant, and the slot never
// lets its instants go backwards, so state changes are a deterministic
// function of the commands and the instants they were given.
package keyspace
