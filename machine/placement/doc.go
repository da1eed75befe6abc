// Package placement is the state machine's placement room: which slots a
// group of a sharded cluster owns at which epoch (SLUICE.OWN, the
// ownership record the core's fence applies by), its slot migrations
// (SLUICE.JOB, SLUICE.CUT, SLUICE.IMPORT, SLUICE.MOVED: slotjobs.go,
// slotmove.go), the groups added to a running cluster (SLUICE.GROUPS) and
// the records of slots as a payload (SlotExport, WalkPayload). It sees an
// apply through Exec and its machine through Core, which package machine
// implements; it never imports package machine.
package placement
