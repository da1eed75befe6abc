// Package limiters is the state machine's limiters room: CL.THROTTLE
// (GCRA, as redis-cell), SW.CHECK and FW.CHECK (sliding and fixed
// windows), CONC.* (concurrency leases) and QUOTA.* (calendar quotas). The
// algorithms are pure packages (gcra, window, conc, quota); this room
// parses their commands, reads and writes their records in the keyspace
// (inline in the record where they fit: inline.go) and answers. It
// declares its commands and kinds in package room's types and sees an
// apply through Exec, which package machine's apply implements; it never
// imports package machine. The decide and reserve rooms store and read
// the same records through StoreInline, WindowStateOf, StoreLog,
// StoreQuota and Room.QuotaAt.
package limiters
