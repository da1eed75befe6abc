package server

import (
	"github.com/sluice-rl/sluice/persist"
)

// openStore restores the keyspace from the data directory and starts
// persistence: quota write-through and periodic snapshots. A data
// directory that cannot be read is an error: the server does not start.
func (s *Server) openStore() error {
	st, err := persist.Open(persist.Options{
		Dir:              s.cfg.DataDir,
		QuotaFsync:       s.cfg.QuotaFsync,
		SnapshotInterval: s.cfg.SnapshotInterval,
	}, persist.Deps{
		Keys:    s.env.Machine.Keys(),
		Now:     s.env.Clock.Now,
		Applied: s.env.Machine.Applied,
		Restore: s.env.Machine.Restore,
		Log:     s.log,
		Changes: s.env.Machine.Changes,
	})
	if err != nil {
		return err
	}
	s.store = st
	s.env.Machine.SetDurability(st.Journal())
	s.env.Durable = st
	s.env.Snapshots = st
	return nil
}

// closeStore writes the shutdown snapshot and closes the quota store.
func (s *Server) closeStore() error {
	if s.store == nil {
		return nil
	}
	return s.store.Close()
}

// awaitDurable holds back the replies of a connection whose commands
// changed durable state until the changes are on disk (--quota-fsync
// always). The server sends the replies of everything one read brought in
// at once, so one wait per batch covers all of it; many connections
// waiting at once share one fsync. If the change cannot be made durable it
// reports false: the connection is closed without its replies.
func (s *Server) awaitDurable(cs *connState) bool {
	if !cs.conn.DurablePending() {
		return true
	}
	if err := cs.conn.AwaitDurable(); err != nil {
		s.log.Error("closing client: its changes did not reach the disk", "addr", cs.conn.Addr, "err", err)
		return false
	}
	return true
}
