package placement

import (
	"encoding/binary"
	"slices"

	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/slot"
)

// A slot migration job (CLUSTER MIGRATESLOTS, driven by package slotmove)
// is replicated state of the source group, kept with the slots the group
// owns (the same record, OwnershipKey): a new leader of the source group
// finds the job where the last one left it and resumes it, and the job's
// chunks change ownership and progress in the same apply.

// Job states.
const (
	JobRunning   = "running"
	JobSuccess   = "success"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// maxEndedJobs is how many ended jobs a group keeps for CLUSTER
// GETSLOTMIGRATIONS (running ones are always kept).
const maxEndedJobs = 32

// Job is one migration of slot ranges from this group to another.
type Job struct {
	// ID is the job's name (40 hex characters, as Valkey's).
	ID string
	// TargetGroup is the group the slots move to; SourceNode and
	// TargetNode are the node ids CLUSTER MIGRATESLOTS named.
	TargetGroup, SourceNode, TargetNode string
	// State is JobRunning until the job ends; Message says why a job
	// failed.
	State, Message string
	// Cancel is set by CLUSTER CANCELSLOTMIGRATIONS: no further chunk is
	// cut; a chunk already cut completes.
	Cancel bool
	// Ranges are the slots to move; Done those moved; Pending the chunk
	// cut at PendingEpoch and not yet confirmed imported.
	Ranges, Done, Pending [][2]int
	PendingEpoch          uint64
	// Keys and Bytes count what the confirmed chunks carried.
	Keys, Bytes uint64
	// Created, Updated and Ended are log instants (ns); Ended 0 while
	// running.
	Created, Updated, Ended int64
	// ShowUntil is a wall-clock instant (Unix ms) until which CLUSTER
	// NODES still shows an ended job's slots as this group's, so every
	// member switches to the new owners at one instant (0: from its end).
	// The command that ends the job carries it: the driver's clock, read
	// before the command entered the log, never inside the apply.
	ShowUntil int64
}

// Remaining are the job's slots neither moved nor pending, in order.
func (j *Job) Remaining() [][2]int {
	var b slotBits
	b.add(j.Ranges)
	b.remove(j.Done)
	b.remove(j.Pending)
	return b.ranges()
}

// job finds the job named id.
func (o *Ownership) job(id string) (int, bool) {
	for i := range o.Jobs {
		if o.Jobs[i].ID == id {
			return i, true
		}
	}
	return -1, false
}

// with is a copy of o owning bits at epoch, with o's jobs (copied: a job
// changed in the copy leaves o's unchanged).
func (o *Ownership) with(epoch uint64, bits slotBits) *Ownership {
	n := &Ownership{Epoch: epoch, bits: bits, Jobs: slices.Clone(o.Jobs)}
	n.Ranges = bits.ranges()
	return n
}

// trimJobs drops the oldest ended jobs beyond maxEndedJobs.
func (o *Ownership) trimJobs() {
	ended := 0
	for _, j := range o.Jobs {
		if j.State != JobRunning {
			ended++
		}
	}
	for i := 0; ended > maxEndedJobs && i < len(o.Jobs); {
		if o.Jobs[i].State != JobRunning {
			o.Jobs = slices.Delete(o.Jobs, i, i+1)
			ended--
			continue
		}
		i++
	}
}

// slotBits is a set of slots.
type slotBits [slot.Count / 64]uint64

func (b *slotBits) add(ranges [][2]int) {
	for _, r := range ranges {
		for s := r[0]; s <= r[1]; s++ {
			b[s/64] |= 1 << (s % 64)
		}
	}
}

func (b *slotBits) remove(ranges [][2]int) {
	for _, r := range ranges {
		for s := r[0]; s <= r[1]; s++ {
			b[s/64] &^= 1 << (s % 64)
		}
	}
}

func (b *slotBits) has(s int) bool { return b[s/64]&(1<<(s%64)) != 0 }

// hasAll reports whether every slot of ranges is in b.
func (b slotBits) hasAll(ranges [][2]int) bool {
	for _, r := range ranges {
		for s := r[0]; s <= r[1]; s++ {
			if !b.has(s) {
				return false
			}
		}
	}
	return true
}

// hasAny reports whether some slot of ranges is in b.
func (b slotBits) hasAny(ranges [][2]int) bool {
	for _, r := range ranges {
		for s := r[0]; s <= r[1]; s++ {
			if b.has(s) {
				return true
			}
		}
	}
	return false
}

// ranges are b's slots as sorted, merged ranges.
func (b slotBits) ranges() [][2]int {
	var out [][2]int
	for s := 0; s < slot.Count; s++ {
		if !b.has(s) {
			continue
		}
		from := s
		for s+1 < slot.Count && b.has(s+1) {
			s++
		}
		out = append(out, [2]int{from, s})
	}
	return out
}

func bitsOf(ranges [][2]int) slotBits {
	var b slotBits
	b.add(ranges)
	return b
}

// jobsVersion marks the encoding of jobs with ShowUntil: a zero count
// (never written otherwise) and then the version. Records without it (the
// first encoding) start with the count.
const jobsVersion = 1

// appendJobs appends the jobs' encoding (after the ownership's ranges).
func appendJobs(dst []byte, jobs []Job) []byte {
	dst = append(dst, 0, jobsVersion)
	dst = binary.AppendUvarint(dst, uint64(len(jobs)))
	str := func(s string) {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	rgs := func(rs [][2]int) {
		dst = binary.AppendUvarint(dst, uint64(len(rs)))
		for _, r := range rs {
			dst = binary.AppendUvarint(dst, uint64(r[0]))
			dst = binary.AppendUvarint(dst, uint64(r[1]))
		}
	}
	for _, j := range jobs {
		str(j.ID)
		str(j.TargetGroup)
		str(j.SourceNode)
		str(j.TargetNode)
		str(j.State)
		str(j.Message)
		cancel := byte(0)
		if j.Cancel {
			cancel = 1
		}
		dst = append(dst, cancel)
		rgs(j.Ranges)
		rgs(j.Done)
		rgs(j.Pending)
		dst = binary.AppendUvarint(dst, j.PendingEpoch)
		dst = binary.AppendUvarint(dst, j.Keys)
		dst = binary.AppendUvarint(dst, j.Bytes)
		dst = binary.AppendVarint(dst, j.Created)
		dst = binary.AppendVarint(dst, j.Updated)
		dst = binary.AppendVarint(dst, j.Ended)
		dst = binary.AppendVarint(dst, j.ShowUntil)
	}
	return dst
}

// decodeJobs reads what appendJobs wrote.
func decodeJobs(d *room.Reader) []Job {
	n := d.Uvarint(1 << 16)
	version := 0
	if n == 0 && !d.Bad {
		if version = d.Uvarint(jobsVersion); version != jobsVersion {
			d.Bad = true
			return nil
		}
		n = d.Uvarint(1 << 16)
	}
	jobs := make([]Job, 0, n)
	str := func() string { return string(d.Bytes()) }
	rgs := func() [][2]int {
		count := d.Uvarint(slot.Count)
		var out [][2]int
		for range count {
			from, to := d.Uvarint(slot.Count-1), d.Uvarint(slot.Count-1)
			if d.Bad || from > to {
				d.Bad = true
				return nil
			}
			out = append(out, [2]int{from, to})
		}
		return out
	}
	for range n {
		var j Job
		j.ID, j.TargetGroup, j.SourceNode, j.TargetNode, j.State, j.Message = str(), str(), str(), str(), str(), str()
		if len(d.B) == 0 {
			d.Bad = true
			break
		}
		j.Cancel = d.B[0] == 1
		d.B = d.B[1:]
		j.Ranges, j.Done, j.Pending = rgs(), rgs(), rgs()
		j.PendingEpoch, j.Keys, j.Bytes = d.Uvarint64(), d.Uvarint64(), d.Uvarint64()
		j.Created, j.Updated, j.Ended = d.Varint(), d.Varint(), d.Varint()
		if version >= 1 {
			j.ShowUntil = d.Varint()
		}
		if d.Bad {
			break
		}
		jobs = append(jobs, j)
	}
	return jobs
}
