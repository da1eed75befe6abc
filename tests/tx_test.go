package tests

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// txClients are the clients the transaction tests run through: one node,
// and a 3-node cluster through go-redis' ClusterClient.
func txClients(t *testing.T) map[string]redis.UniversalClient {
	single := StartServer(t)
	cl := StartCluster(t, 3, nil)
	cl.Leader()
	return map[string]redis.UniversalClient{"one node": single.Client(), "cluster": cl.Client()}
}

// go-redis' TxPipelined (MULTI … EXEC) and Watch (optimistic locking with
// retries) on one node and on a cluster.
func TestTransactionsGoRedis(t *testing.T) {
	for name, c := range txClients(t) {
		t.Run(name, func(t *testing.T) {
			var first, second *redis.Cmd
			cmds, err := c.TxPipelined(ctx(t), func(p redis.Pipeliner) error {
				first = p.Do(ctx(t), "CL.THROTTLE", "{tx}k", 1, 1, 60)
				p.Do(ctx(t), "SW.CHECK", "{tx}s", 5, 60)
				second = p.Do(ctx(t), "CL.THROTTLE", "{tx}k", 1, 1, 60)
				return nil
			})
			if err != nil || len(cmds) != 3 {
				t.Fatalf("TxPipelined: %v, %d replies", err, len(cmds))
			}
			a, b := ints(t, first), ints(t, second)
			if a[2] != 1 || b[2] != 0 {
				t.Fatalf("the transaction's throttles: %v %v", a, b)
			}
			// A queued command its own check refuses answers its error;
			// the others run.
			cmds, err = c.TxPipelined(ctx(t), func(p redis.Pipeliner) error {
				p.Do(ctx(t), "CL.THROTTLE", "{tx}bad", "x", 1, 1)
				p.Do(ctx(t), "EXISTS", "{tx}k")
				return nil
			})
			if err == nil || cmds[0].Err() == nil || cmds[1].(*redis.Cmd).Val() != int64(1) {
				t.Fatalf("a refused command in a transaction: %v %v", err, cmds)
			}

			// WATCH aborts a transaction whose key another client changed
			// after it was watched: EXEC runs nothing (TxFailedErr), so the
			// key holds the other client's unit alone. Unchanged, it runs.
			err = c.Watch(ctx(t), func(tx *redis.Tx) error {
				if err := c.Do(ctx(t), "QUOTA.CHECK", "{tx}w", 1000, "DAY").Err(); err != nil {
					return err
				}
				_, err := tx.TxPipelined(ctx(t), func(p redis.Pipeliner) error {
					p.Do(ctx(t), "QUOTA.CHECK", "{tx}w", 1000, "DAY")
					return nil
				})
				return err
			}, "{tx}w")
			if !errors.Is(err, redis.TxFailedErr) {
				t.Fatalf("EXEC after another client changed the watched key: %v, want the transaction aborted", err)
			}
			if err := c.Watch(ctx(t), func(tx *redis.Tx) error {
				_, err := tx.TxPipelined(ctx(t), func(p redis.Pipeliner) error {
					p.Do(ctx(t), "QUOTA.CHECK", "{tx}w", 1000, "DAY")
					return nil
				})
				return err
			}, "{tx}w"); err != nil {
				t.Fatalf("EXEC with the watched key unchanged: %v", err)
			}
			if used, err := c.Do(ctx(t), "QUOTA.GET", "{tx}w").Slice(); err != nil || used[0] != int64(2) {
				t.Fatalf("quota used %v (%v), want 2: the other client's unit and the unaborted transaction's", used, err)
			}

			// Watch: 8 clients each add 5 units to one quota, reading it
			// first; a transaction retried when the key moved counts once.
			const workers, each = 8, 5
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						for attempt := 0; ; attempt++ {
							if attempt > 200 {
								t.Error("no transaction went through in 200 attempts")
								return
							}
							err := c.Watch(context.Background(), func(tx *redis.Tx) error {
								if err := tx.Do(ctx(t), "QUOTA.GET", "{tx}q").Err(); err != nil && !errors.Is(err, redis.Nil) {
									return err
								}
								_, err := tx.TxPipelined(ctx(t), func(p redis.Pipeliner) error {
									p.Do(ctx(t), "QUOTA.CHECK", "{tx}q", 1000, "DAY")
									return nil
								})
								return err
							}, "{tx}q")
							if errors.Is(err, redis.TxFailedErr) {
								continue
							}
							if err != nil {
								t.Error(err)
								return
							}
							break
						}
					}
				}()
			}
			wg.Wait()
			used, err := c.Do(ctx(t), "QUOTA.GET", "{tx}q").Slice()
			if err != nil || used[0] != int64(workers*each) {
				t.Fatalf("quota used %v (%v), want %d: every committed transaction once", used, err, workers*each)
			}
		})
	}
}

// MULTI, EXEC, DISCARD and WATCH answer as Redis does, byte for byte.
func TestTransactionReplies(t *testing.T) {
	s := StartServer(t)
	for _, tc := range []struct {
		req     string
		replies int
		want    string
	}{
		{"EXEC\r\n", 1, "-ERR EXEC without MULTI\r\n"},
		{"DISCARD\r\n", 1, "-ERR DISCARD without MULTI\r\n"},
		{"MULTI\r\nMULTI\r\nDISCARD\r\n", 3, "+OK\r\n-ERR MULTI calls can not be nested\r\n+OK\r\n"},
		{"MULTI\r\nWATCH k\r\nDISCARD\r\n", 3, "+OK\r\n-ERR WATCH inside MULTI is not allowed\r\n+OK\r\n"},
		{"MULTI\r\nNOSUCH\r\nPING\r\nEXEC\r\n", 4, "+OK\r\n-ERR unknown command 'NOSUCH', with args beginning with: \r\n+QUEUED\r\n-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{"MULTI\r\nGET\r\nEXEC\r\n", 3, "+OK\r\n-ERR wrong number of arguments for 'get' command\r\n-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{"MULTI\r\nPING\r\nDEL a b\r\nEXEC\r\n", 4, "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+PONG\r\n:0\r\n"},
		{"MULTI\r\nEXEC\r\n", 2, "+OK\r\n*0\r\n"},
	} {
		if got := rawExchange(t, s.Addr, tc.req, tc.replies); got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.req, got, tc.want)
		}
	}
}
