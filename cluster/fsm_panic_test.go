package cluster

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// A command that panics inside its apply answers an internal error on
// every replica; the commands after it in the same entry, and the entries
// after that, apply; replicas (leader and follower) end in one state.
func TestFSMPanicInsideEntry(t *testing.T) {
	leader, follower := newFSM(), newFSM()
	follower.props = newProposals() // waits for nothing: keeps no replies
	entry := AppendBatch(nil, 5e18, [][][]byte{
		words("CL.THROTTLE", "{x}a", "5", "10", "60"),
		words("DEBUG", "APPLY-PANIC", "{x}p"),
		words("CL.THROTTLE", "{x}a", "5", "10", "60"),
	})
	res, ok := leader.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: entry}).(*applied)
	if !ok {
		t.Fatal("the entry did not apply")
	}
	if r := follower.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: entry}); r != nil {
		t.Fatalf("follower: %v", r)
	}
	want := "*5\r\n:0\r\n:6\r\n:5\r\n:-1\r\n:6\r\n" +
		"-ERR internal error in debug|apply-panic\r\n" +
		"*5\r\n:0\r\n:6\r\n:4\r\n:-1\r\n:12\r\n"
	if string(res.replies) != want {
		t.Fatalf("replies %q, want %q", res.replies, want)
	}
	next := AppendBatch(nil, 5e18+1, [][][]byte{words("TYPE", "{x}p")})
	res = leader.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: next}).(*applied)
	follower.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: next})
	if string(res.replies) != "+gcra\r\n" {
		t.Fatalf("the change made before the panic: TYPE %q", res.replies)
	}
	da, _ := leader.m.Digest()
	db, _ := follower.m.Digest()
	if da != db {
		t.Fatalf("digests differ: %s / %s", da, db)
	}
}

// FuzzReplicatedApply drives two replicas, one keeping replies as a
// leader does and one discarding them as a follower does, through the
// batch codec with random commands cut into random entries: nothing
// panics out of an apply and the digests agree.
func FuzzReplicatedApply(f *testing.F) {
	f.Add([]byte("CL.THROTTLE\x00k\x0015\x0030\x0060\x01\x02SW.CHECK\x00k2\x0010\x0060\x00EXACT\x01DEBUG\x00APPLY-PANIC\x00k\x02TYPE\x00k"))
	f.Add([]byte("RL.RULES\x00LOAD\x00f.yaml\x00domain: d\ndescriptors:\n  - key: u\n    rate_limit: {unit: second, requests_per_unit: 2}\n\x02" +
		"RL.CHECK\x00d\x00DESCRIPTOR\x00u\x00x\x01RL.CHECK\x00d\x00DESCRIPTOR\x00u\x00x\x02RL.RULES\x00LIST\x01FLUSHALL"))
	f.Add([]byte("QUOTA.CHECK\x00q\x005\x00DAY\x00TZ\x00Europe/Berlin\x01QUOTA.REFUND\x00q\x001\x02CONC.ACQUIRE\x00c\x002\x0030\x00r\x01CONC.RENEW\x00c\x00r\x0060"))
	f.Fuzz(func(t *testing.T, data []byte) {
		leader, follower := newFSM(), newFSM()
		follower.props = newProposals() // waits for nothing: keeps no replies
		stamp := int64(4102444800e9)
		// Entries are separated by 0x02, commands by 0x01, arguments by 0x00.
		for i, part := range bytes.Split(data, []byte{2}) {
			if i == 8 {
				break
			}
			var cmds [][][]byte
			for _, line := range bytes.Split(part, []byte{1}) {
				if len(line) == 0 || len(cmds) == 16 {
					continue
				}
				args := bytes.Split(line, []byte{0})
				if len(args) > 64 {
					args = args[:64]
				}
				cmds = append(cmds, args)
			}
			stamp += 1_300_000_000
			l := &raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: AppendBatch(nil, stamp, cmds)}
			res, ok := leader.Apply(l).(*applied)
			if !ok {
				t.Fatalf("entry %d did not apply", i)
			}
			if r := follower.Apply(l); r != nil {
				t.Fatalf("follower, entry %d: %v", i, r)
			}
			if len(res.ends) != len(cmds) {
				t.Fatalf("entry %d: %d replies for %d commands", i, len(res.ends), len(cmds))
			}
			start := 0
			for j, end := range res.ends {
				r := string(res.replies[start:end])
				start = end
				if strings.HasPrefix(r, "-ERR internal error in ") && !strings.EqualFold(string(cmds[j][0]), "debug") {
					t.Fatalf("%q panicked: %q", cmds[j], r)
				}
			}
		}
		da, err := leader.m.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if db, _ := follower.m.Digest(); da != db {
			t.Fatalf("digests differ: %s / %s", da, db)
		}
	})
}

// A corrupt entry with a later stamp moves no clock: it is rejected before
// anything changes.
func TestFSMCorruptEntryKeepsTheClock(t *testing.T) {
	f := newFSM()
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: AppendBatch(nil, 5e18, nil)})
	later := AppendBatch(nil, 6e18, [][][]byte{words("CL.THROTTLE", "k", "1", "1", "1")})
	if _, ok := f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: later[:len(later)-1]}).(error); !ok {
		t.Fatal("a truncated entry applied")
	}
	if got := f.m.Applied(); got != 5e18 {
		t.Fatalf("applied instant %d after a corrupt entry, want 5e18", got)
	}
}
