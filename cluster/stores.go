package cluster

import (
	"io"
	"log/slog"

	"github.com/hashicorp/raft"

	"github.com/sluice-rl/sluice/raftlog"
)

// openPebbleStores opens the Raft log and stable store in dir: one Pebble
// database, every write synced before it returns.
func openPebbleStores(dir string, log *slog.Logger) (raft.LogStore, raft.StableStore, io.Closer, error) {
	o := raftlog.DefaultOptions(dir)
	o.Logger = log
	s, err := raftlog.Open(o)
	if err != nil {
		return nil, nil, nil, err
	}
	return s, s, s, nil
}
