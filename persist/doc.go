// Package persist keeps sluice's state across restarts: quota changes are
// written through to a Pebble database as they happen, and the whole
// keyspace (every limiter kind) is snapshotted to one file periodically, on
// SAVE/BGSAVE and at graceful shutdown.
//
// Quotas get write-through because they count months and years of usage
// that cannot be re-earned: losing a day of a monthly quota is a billing
// error. The other kinds (GCRA, windows, leases) hold seconds to minutes of
// state that a restart may reasonably forget, so a snapshot a minute bounds
// what they lose without putting a disk write in their path.
//
// # Write path
//
// A command that changes a quota appends the new encoded state to an
// in-memory journal under its slot lock (no I/O under a lock) and gets a
// sequence number. One writer goroutine takes everything queued, writes it
// to Pebble as one batch, and syncs according to the FsyncPolicy:
//
//   - FsyncAlways: every batch is synced before the replies of the commands
//     in it are sent. Commands that arrive while a sync runs queue for the
//     next batch, so N concurrent clients share one fsync (group commit).
//   - FsyncEverySec: batches are written without a sync; the writer syncs
//     once a second when something was written.
//   - FsyncNo: as everysec, but syncing every NoSyncInterval (30 s), the age
//     at which an OS writes dirty pages back anyway.
//
// DEL/UNLINK of a quota key and FLUSHALL are journaled too (FLUSHALL under
// every slot lock, so it is ordered exactly among the changes around it).
// Quota keys that expire are not journaled: their records carry the expiry
// and are dropped at startup, and swept from the store after each snapshot.
//
// # Startup
//
// Open locks the data directory (sluice.pid, flock: a second process is
// refused with the holder's pid), removes a snapshot.sluice.tmp a crash
// left, refuses a disk with too little room to open the store, then reads
// the snapshot file (keys already expired are dropped), then every live
// record of the quota store over it: the store holds the latest state of
// every quota, so the snapshot's quota records are superseded. That holds
// because a snapshot is complete only once the store has synced every
// journaled change numbered up to the journal's position when the snapshot
// finished (syncThrough, before the rename), whatever the FsyncPolicy. If
// the store journaled a FLUSHALL numbered after the snapshot's Seq, the
// snapshot's records are all stale and skipped. A data directory that
// cannot be read stops Open with an error naming the file: a snapshot with
// a bad magic, version or checksum; a store Pebble cannot open or whose
// records or tables do not decode; a snapshot file the store says was
// written but is gone; a store missing beside a snapshot (ErrMissingStore);
// a store whose "m:seq" is below the snapshot's Seq or below quotas.synced
// (ErrStoreBehind: its log lost synced writes, which Pebble's replay takes
// for a torn tail). sluice never starts empty, or with part of its quotas,
// over data it could not read. Options.RebuildQuotaStore (the
// --rebuild-quota-store flag) moves such a store aside to
// quotas.damaged-<unix seconds> and builds a new one from the snapshot's
// quotas, logging at ERROR level; a store created from a snapshot records
// "m:seq" = max(snapshot Seq, quotas.synced).
//
// # Disk faults
//
// Pebble stops the process when a log or manifest write fails. The store's
// Pebble runs on healthFS, which retries a write, create, rename or mkdir
// that fails with ENOSPC, EDQUOT, EIO or EROFS (pausing 10 ms doubling to
// 1 s) instead of returning the error; meanwhile Store.Err is ErrJournal
// with the cause, commands refuse quota writes, and waiting replies are
// released with it. A failed fsync is not retried (the kernel may have
// dropped the pages): Err stays set until restart. While Open runs,
// operations fail at once instead, so a store that cannot open is refused.
//
// # What a crash can lose
//
// A graceful shutdown (SIGINT, SIGTERM) loses nothing: it writes a final
// snapshot and syncs the journal. A crash (kill -9, power loss) loses:
//
//	kind                          always      everysec          no
//	QUOTA.*                       nothing     ≤ ~1 s of changes  ≤ ~30 s of changes
//	CL.THROTTLE, SW.CHECK,        every change since the last complete snapshot
//	FW.CHECK, CONC.*              (≤ --snapshot-interval, 60 s by default),
//	                              whatever the quota fsync policy
//
// "Nothing" means nothing acknowledged: a reply is sent only after its
// change is synced. The quota bounds are the time since the last sync plus
// the sync in progress; they hold for a process crash and a machine crash
// alike (Pebble keeps the write-ahead log's last partial block in process
// memory until a sync). The non-quota kinds revert to the snapshot: keys
// created since are gone, capacity consumed since is given back, keys
// deleted since come back unless expired. FLUSHALL and DEL of quota keys
// are as durable as quota changes.
//
// # Snapshot format (version 2)
//
// The format is versioned as a whole (the states inside carry no version
// of their own) and is the one a replication log will ship, so it is a
// byte stream with no seeking:
//
//	magic     8 bytes   "\x89SLUICE\n"
//	version   uvarint   2 (1 is still read: it has no applied field, which is then created)
//	seq       uvarint   journal position reflected: every journaled change numbered ≤ seq was applied before the first key was read
//	created   varint    Unix ns, server clock, when the snapshot began (for people, LASTSAVE)
//	applied   varint    Unix ns, the state machine's applied instant: the keys are those live at it,
//	                    and a restore resumes the machine from it
//	records, each:
//	  kind    1 byte    keyspace.Kind (1 GCRA … 6 quota); never 0
//	  keylen  uvarint   ≤ 512 MiB
//	  key     keylen bytes
//	  word    8 bytes   little-endian int64: GCRA's TAT, else the expiry instant (0 = never)
//	  statelen uvarint  ≤ 64 MiB; 0 for GCRA
//	  state   statelen bytes: the kind's AppendBinary (window.CounterState, window.LogState,
//	          window.FixedState, conc.Leases, quota.State)
//	end       1 byte    0
//	count     uvarint   number of records
//	checksum  4 bytes   little-endian CRC-32C (Castagnoli) of every byte before it
//
// uvarint and varint are encoding/binary's (varint zigzag). Records come
// slot by slot in slot order, within a slot in insertion order; each key
// appears once. A reader rejects an unknown magic or version, an unknown
// kind, lengths over the bounds, a count or checksum that does not match,
// and bytes after the checksum.
//
// The snapshot is written to snapshot.sluice.tmp, synced, renamed over
// snapshot.sluice and the directory synced, so the file is always a
// complete snapshot. Each slot is encoded under its lock (states are
// changed in place) and written to the file outside it.
//
// # Files
//
//	snapshot.sluice       the last complete snapshot (format below)
//	snapshot.sluice.tmp   a snapshot being written; removed at startup
//	quotas/               the Pebble quota store (layout below)
//	quotas.synced         12 bytes: the last journal seq the store synced,
//	                      uint64 LE, then the CRC-32C (Castagnoli) of those
//	                      8 bytes, uint32 LE. Rewritten in place after each
//	                      sync, never synced itself, so it can only lag; a
//	                      short or torn file reads as 0 (no check).
//	sluice.pid            the serving process's pid, flock-ed while it runs
//	node-id               the cluster node id (package cluster)
//
// # Quota store layout
//
// The Pebble database in <data-dir>/quotas holds one record per quota key,
// 'q' | slot (2 bytes big-endian) | key → expiry (8 bytes LE) | quota.State,
// plus meta keys "m:seq" (last journal sequence written), "m:flush" (the
// last FLUSHALL's sequence number) and "m:snapshot" (the last snapshot's
// seq and creation instant).
package persist
