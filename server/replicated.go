package server

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/cluster"
)

// raftSnapshots answers SAVE, BGSAVE, LASTSAVE and INFO persistence on a
// replicated node: a snapshot is a Raft snapshot (the log is what makes
// changes durable there).
type raftSnapshots struct {
	n    *cluster.Node
	last atomic.Int64 // Unix seconds of the last snapshot taken here
	bg   atomic.Bool
}

func (r *raftSnapshots) Save() error {
	if err := r.n.Snapshot(); err != nil {
		return err
	}
	r.last.Store(time.Now().Unix())
	return nil
}

func (r *raftSnapshots) BackgroundSave(bool) (bool, error) {
	if !r.bg.CompareAndSwap(false, true) {
		return false, nil
	}
	go func() {
		defer r.bg.Store(false)
		r.Save()
	}()
	return true, nil
}

func (r *raftSnapshots) LastSave() int64 { return r.last.Load() }

func (r *raftSnapshots) Info() [][2]string {
	st := r.n.Status()
	b01 := "0"
	if r.bg.Load() {
		b01 = "1"
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	return [][2]string{
		{"rdb_bgsave_in_progress", b01},
		{"rdb_last_save_time", strconv.FormatInt(r.last.Load(), 10)},
		{"aof_enabled", "0"},
		{"sluice_raft_last_index", u(st.LastIndex)},
		{"sluice_raft_commit_index", u(st.CommitIndex)},
		{"sluice_raft_applied_index", u(st.AppliedIdx)},
	}
}
