package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/shardmap"
)

// JoinedMapFile is where a member that joined a running cluster
// (--cluster-join) keeps the map it joined with, in its data directory: it
// starts from it again on a restart (the groups' logs say the rest).
const JoinedMapFile = "cluster.yaml"

// JoinMap is the map a member joining a running sharded cluster starts
// from: the one kept in dataDir when it joined before; else the live map
// the member at addr gives (CLUSTER SLUICEMAP), asked until CLUSTER
// ADDGROUP has named nodeID, then kept. It waits until ctx ends.
func JoinMap(ctx context.Context, dataDir, addr, nodeID, password string, log *slog.Logger) (*shardmap.Map, error) {
	path := filepath.Join(dataDir, JoinedMapFile)
	if _, err := os.Stat(path); err == nil {
		return shardmap.Load(path)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, Protocol: 2, MaxRetries: -1, DisableIdentity: true,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	defer c.Close()
	var said time.Time
	for {
		text, err := c.Do(ctx, "CLUSTER", "SLUICEMAP").Text()
		if err == nil {
			m, perr := shardmap.Parse([]byte(text))
			if perr != nil {
				return nil, fmt.Errorf("the map %s gave: %w", addr, perr)
			}
			if _, _, ok := m.Member(nodeID); ok {
				if err := os.MkdirAll(dataDir, 0o755); err != nil {
					return nil, err
				}
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					return nil, err
				}
				return m, nil
			}
		}
		if time.Since(said) > 10*time.Second {
			said = time.Now()
			if err != nil {
				log.Warn("cannot read the cluster map to join", "from", addr, "err", err)
			} else {
				log.Info("waiting for CLUSTER ADDGROUP to name this member", "node_id", nodeID, "from", addr)
			}
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(errors.New("no cluster map to join"), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
