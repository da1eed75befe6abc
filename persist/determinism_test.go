package persist_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-rl/sluice/clock"
	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/persist"
)

// replica is one node applying a command log: its own keyspace (with its
// own random hash seed) and a clock it is told the instants by.
type replica struct {
	env *commands.Env
	ctx *commands.Ctx
}

func newReplica() *replica {
	env := &commands.Env{Keys: keyspace.New(), Clock: clock.New(nil), Table: commands.NewTable(), Stats: &commands.Stats{}}
	return &replica{env: env, ctx: &commands.Ctx{Env: env, Conn: &commands.Conn{Proto: 2, Authenticated: true}, W: &commands.Writer{Proto: 2}}}
}

// apply runs one logged command at its instant and returns the reply bytes.
func (r *replica) apply(at int64, args [][]byte) []byte {
	r.env.Clock.Freeze(at)
	r.ctx.Reset()
	r.ctx.W.Buf = r.ctx.W.Buf[:0]
	r.env.Table.Dispatch(r.ctx, args)
	return r.ctx.W.Buf
}

func (r *replica) snapshot(t *testing.T) []byte {
	var buf bytes.Buffer
	if _, err := persist.WriteSnapshot(&buf, r.env.Keys, persist.Header{Seq: 1, Created: 1}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// randomCommand draws a command of any limiter kind on a small key set, so
// kinds collide (WRONGTYPE), keys expire and come back, and leases churn.
func randomCommand(rng *rand.Rand) [][]byte {
	key := fmt.Sprintf("{t%d}k%d", rng.IntN(4), rng.IntN(40))
	id := fmt.Sprintf("req%d", rng.IntN(30))
	var s []string
	switch rng.IntN(12) {
	case 0, 1:
		s = []string{"CL.THROTTLE", key, fmt.Sprint(rng.IntN(10)), fmt.Sprint(1 + rng.IntN(20)), fmt.Sprint(1 + rng.IntN(30)), fmt.Sprint(rng.IntN(3))}
	case 2:
		s = []string{"SW.CHECK", key, fmt.Sprint(1 + rng.IntN(20)), fmt.Sprint(1 + rng.IntN(30))}
	case 3:
		s = []string{"SW.CHECK", key, fmt.Sprint(1 + rng.IntN(20)), fmt.Sprint(1 + rng.IntN(30)), "EXACT", "COST", fmt.Sprint(rng.IntN(4))}
	case 4:
		s = []string{"FW.CHECK", key, fmt.Sprint(1 + rng.IntN(20)), fmt.Sprint(1 + rng.IntN(30))}
	case 5, 6:
		s = []string{"CONC.ACQUIRE", key, fmt.Sprint(1 + rng.IntN(5)), fmt.Sprint(1 + rng.IntN(20)), id}
	case 7:
		s = []string{"CONC.RELEASE", key, id}
	case 8:
		s = []string{"CONC.RENEW", key, id, fmt.Sprint(1 + rng.IntN(20))}
	case 9:
		s = []string{"QUOTA.CHECK", key, fmt.Sprint(1 + rng.IntN(50)), []string{"HOUR", "DAY", "MONTH"}[rng.IntN(3)], "TZ", "Europe/Berlin"}
	case 10:
		s = []string{"QUOTA.REFUND", key, fmt.Sprint(rng.IntN(3))}
	default:
		s = []string{"DEL", key}
	}
	args := make([][]byte, len(s))
	for i, a := range s {
		args[i] = []byte(a)
	}
	return args
}

// TestReplicasConverge is the rule everything rests on: state changes only
// through apply(command, now), so two nodes given the same commands at the
// same instants answer alike and hold byte-identical state, whatever their
// hash seeds or memory layout.
func TestReplicasConverge(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		a, b := newReplica(), newReplica()
		now := int64(4102444800) * 1e9
		for step := range 20_000 {
			now += rng.Int64N(int64(3e9))
			args := randomCommand(rng)
			ra := bytes.Clone(a.apply(now, args))
			rb := b.apply(now, args)
			if !bytes.Equal(ra, rb) {
				t.Fatalf("seed %d step %d: %q answered %q and %q", seed, step, args, ra, rb)
			}
			if step%5000 == 4999 {
				if sa, sb := a.snapshot(t), b.snapshot(t); !bytes.Equal(sa, sb) {
					t.Fatalf("seed %d step %d: snapshots differ (%d and %d bytes)", seed, step, len(sa), len(sb))
				}
			}
		}
		if n := a.env.Keys.Stats().Keys; n == 0 {
			t.Fatalf("seed %d: the trace left no keys; it tests nothing", seed)
		}
	}
}
