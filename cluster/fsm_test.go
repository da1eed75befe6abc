package cluster

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluice-rl/sluice/machine"
)

func newFSM() *fsm {
	var mono int64
	return &fsm{m: machine.New(machine.Options{}), mono: func() int64 { mono += 1e6; return mono }}
}

func words(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, w := range s {
		out[i] = []byte(w)
	}
	return out
}

// randomBatch is up to 12 commands of every kind on a few keys.
func randomBatch(rng *rand.Rand) [][][]byte {
	var cmds [][][]byte
	for range rng.IntN(13) {
		k := fmt.Sprintf("{t%d}k%d", rng.IntN(3), rng.IntN(20))
		n := func(lo, k int) string { return fmt.Sprint(lo + rng.IntN(k)) }
		var c [][]byte
		switch rng.IntN(9) {
		case 0:
			c = words("CL.THROTTLE", k, n(0, 5), n(1, 10), n(1, 20))
		case 1:
			c = words("SW.CHECK", k, n(1, 10), n(1, 20), "EXACT")
		case 2:
			c = words("FW.CHECK", k, n(1, 10), n(1, 20))
		case 3:
			c = words("CONC.ACQUIRE", k, n(1, 4), n(1, 10), "id"+n(0, 6))
		case 4:
			c = words("QUOTA.CHECK", k, n(1, 30), "DAY", "TZ", "America/New_York")
		case 5:
			c = words("DEL", k)
		case 6:
			c = words("TTL", k)
		case 7:
			c = words("NOSUCH", k) // an unknown command fails alike everywhere
		default:
			c = words("QUOTA.GET", k)
		}
		cmds = append(cmds, c)
	}
	return cmds
}

type bufSink struct{ bytes.Buffer }

func (b *bufSink) ID() string    { return "test" }
func (b *bufSink) Cancel() error { return nil }
func (b *bufSink) Close() error  { return nil }

// Replicas driven by the same log answer alike and end in the same state;
// one restored from a snapshot midway joins them.
func TestFSMReplicasAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	a, b := newFSM(), newFSM()
	var c *fsm
	stamp := int64(4102444800) * 1e9
	for i := range 3000 {
		stamp += rng.Int64N(int64(2e9))
		l := &raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: AppendBatch(nil, stamp, randomBatch(rng))}
		ra, rb := a.Apply(l), b.Apply(l)
		pa, ok1 := ra.(*applied)
		pb, ok2 := rb.(*applied)
		if !ok1 || !ok2 || !bytes.Equal(pa.replies, pb.replies) {
			t.Fatalf("entry %d: replies differ: %v / %v", i, ra, rb)
		}
		if c != nil {
			if pc := c.Apply(l).(*applied); !bytes.Equal(pc.replies, pa.replies) {
				t.Fatalf("entry %d: the restored replica answered %q, not %q", i, pc.replies, pa.replies)
			}
		}
		if i == 1500 {
			snap, err := a.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			var sink bufSink
			if err := snap.Persist(&sink); err != nil {
				t.Fatal(err)
			}
			snap.Release()
			c = newFSM()
			if err := c.Restore(io.NopCloser(&sink)); err != nil {
				t.Fatal(err)
			}
		}
	}
	da, _ := a.m.Digest()
	db, _ := b.m.Digest()
	dc, _ := c.m.Digest()
	if da != db || da != dc {
		t.Fatalf("digests differ: %s %s %s", da, db, dc)
	}
	if a.m.Keys().Live(a.m.Applied()) == 0 {
		t.Fatal("no keys left: the test tests nothing")
	}
}

// A corrupt entry fails alike everywhere and changes nothing.
func TestFSMCorruptEntry(t *testing.T) {
	f := newFSM()
	good := AppendBatch(nil, 5e18, [][][]byte{words("CL.THROTTLE", "k", "1", "1", "1")})
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: good})
	before, _ := f.m.Digest()
	for cut := range len(good) {
		bad := append([]byte(nil), good[:cut]...)
		if _, ok := f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: bad}).(error); !ok && cut > 0 {
			t.Fatalf("entry cut at %d applied", cut)
		}
	}
	if after, _ := f.m.Digest(); after != before {
		t.Fatal("corrupt entries changed the state")
	}
}

// BenchmarkFSMApply applies an entry of 16 CL.THROTTLE commands (a -P 16
// pipeline's) whose replies someone waits for: the leader's apply.
func BenchmarkFSMApply(b *testing.B) {
	f := newFSM()
	cmds := make([][][]byte, 16)
	for i := range cmds {
		cmds[i] = words("CL.THROTTLE", fmt.Sprintf("user:%d", i), "1000000", "1000000", "1")
	}
	stamp := int64(1_795_000_000_000_000_000)
	b.ReportAllocs()
	for b.Loop() {
		stamp += 1000
		res, ok := f.Apply(&raft.Log{Type: raft.LogCommand, Data: AppendBatch(nil, stamp, cmds)}).(*applied)
		if !ok || len(res.ends) != len(cmds) {
			b.Fatal("no replies")
		}
	}
}
