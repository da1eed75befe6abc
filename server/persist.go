package server

import (
	"strings"

	"github.com/sluice-rl/sluice/persist"
)

// openStore restores the keyspace from the data directory and starts
// persistence: quota write-through and periodic snapshots. A data
// directory that cannot be read is an error: the server does not start.
func (s *Server) openStore() error {
	st, err := persist.Open(persist.Options{
		Dir:               s.cfg.DataDir,
		QuotaFsync:        s.cfg.QuotaFsync,
		SnapshotInterval:  s.cfg.SnapshotInterval,
		RebuildQuotaStore: s.cfg.RebuildQuotaStore,
	}, persist.Deps{
		Keys:    s.env.Machine.Store(),
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
// waiting at once share one fsync. If the change cannot be made durable (a
// full disk), a batch of one command gets the error instead of its reply;
// a longer batch, whose other replies may depend on the change too, is
// not answered: it reports false and the connection is closed.
func (s *Server) awaitDurable(cs *connState) bool {
	if !cs.conn.DurablePending() {
		return true
	}
	err := cs.conn.AwaitDurable()
	if err == nil {
		return true
	}
	if cs.batchCommands == 1 {
		cs.writer.Buf = cs.writer.Buf[:0]
		msg := strings.TrimPrefix(err.Error(), "persist: ")
		cs.writer.Error("ERR " + strings.NewReplacer("\r", " ", "\n", " ").Replace(msg))
		return true
	}
	s.log.Error("closing client: its changes did not reach the disk", "addr", cs.conn.Addr, "err", err)
	return false
}
