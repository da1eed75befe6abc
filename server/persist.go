package server

import (
	"strings"

	"github.com/tidwall/redcon"

	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/persist"
	"github.com/sluice-rl/sluice/quota"
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
		Keys:    s.env.Keys,
		Now:     s.env.Clock.Now,
		Log:     s.log,
		Changes: s.table.WriteCalls,
	})
	if err != nil {
		return err
	}
	s.store = st
	s.env.Durable = durability{st}
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

// durability adapts the store's journal to the command layer's hook.
type durability struct{ st *persist.Store }

func (d durability) QuotaChanged(key []byte, q *quota.State) commands.Ticket {
	return commands.NewTicket(d.st, d.st.QuotaChanged(key, q))
}

func (d durability) QuotaDeleted(key []byte) commands.Ticket {
	return commands.NewTicket(d.st, d.st.QuotaDeleted(key))
}

func (d durability) Flushed() commands.Ticket { return commands.NewTicket(d.st, d.st.Flushed()) }

func (d durability) Err() error { return d.st.Err() }

// awaitDurable holds back the replies of a connection whose commands
// changed durable state until the changes are on disk (--quota-fsync
// always). redcon sends replies only once every command it has read is
// answered, so one wait at the end of a pipeline covers all of it; many
// connections waiting at once share one fsync. If the change cannot be
// made durable (a full disk), a command whose change was the only one
// waiting gets the error instead of its reply; when earlier replies of the
// pipeline, already written, depended on it too, the connection is closed
// without them.
func (s *Server) awaitDurable(c redcon.Conn, cs *connState, earlier bool) {
	if !cs.conn.DurablePending() || (len(c.PeekPipeline()) > 0 && !cs.conn.Close) {
		return
	}
	err := cs.conn.AwaitDurable()
	if err == nil {
		return
	}
	if !earlier {
		cs.writer.Buf = cs.writer.Buf[:0]
		msg := strings.TrimPrefix(err.Error(), "persist: ")
		cs.writer.Error("ERR " + strings.NewReplacer("\r", " ", "\n", " ").Replace(msg))
		return
	}
	s.log.Error("closing client: its changes did not reach the disk", "addr", c.RemoteAddr(), "err", err)
	cs.closed = true
	c.NetConn().Close()
}
