package tests

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeSecret(t *testing.T, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Issue #44 (the member port's secret): with --cluster-secret-file, members
// that share the secret form the cluster and fail over as before; a
// connection to a Raft port that does not prove membership is closed
// before Raft hears it; a member with another secret takes no part (it
// never gets an entry, and the others say why).
func TestClusterSecretGuardsRaft(t *testing.T) {
	secret := writeSecret(t, "a cluster secret of some length")
	wrong := writeSecret(t, "not this cluster's secret at all")
	cl := NewCluster(t, 3)
	cl.Start(func(i int, _ []string) []string {
		if i == 2 {
			return []string{"--cluster-secret-file", wrong}
		}
		return []string{"--cluster-secret-file", secret}
	})
	leader := cl.Leader()
	if leader == cl.Nodes[2] {
		t.Fatal("the member with another secret leads")
	}
	if err := leader.Client().Do(ctx(t), "CL.THROTTLE", "guarded", 5, 1, 3600).Err(); err != nil {
		t.Fatalf("a write with two members of three sharing the secret: %v", err)
	}
	for _, s := range cl.Followers(leader) {
		if s == cl.Nodes[2] {
			continue
		}
		eventually(t, "the other member with the secret applies the write", func() bool { return digestOf(t, s) == digestOf(t, leader) })
	}
	if digestOf(t, cl.Nodes[2]) == digestOf(t, leader) {
		t.Fatal("the member with another secret holds the write")
	}
	eventually(t, "the members say a connection did not prove membership", func() bool {
		return strings.Contains(leader.Logs(), "did not prove cluster membership")
	})

	// A stranger on a Raft port is closed unheard.
	raw, err := net.Dial("tcp", cl.RaftAddrs[indexOf(cl, leader)])
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00 a request vote, say"))
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, raw); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("a connection without the secret was kept open")
		}
	}

	// Given the secret, the third member catches up, and the three fail
	// over as before.
	cl.Nodes[2].Stop()
	cl.Nodes[2].Args = replaceArg(cl.Nodes[2].Args, "--cluster-secret-file", secret)
	cl.Nodes[2].Start()
	// The leader backs off from a follower it could not reach (up to
	// 10.24 s between tries, hashicorp/raft's failureWait × 2^10). The
	// digest holds the applied instant, which the leader's idle ticks move
	// on: the member is compared with the leader now, not with the digest
	// taken after the write (which it then never matched once a tick came
	// first). The key lives an hour, so equal digests mean the member holds it.
	eventuallyWithin(t, 45*time.Second, "the member, given the secret, catches up",
		func() bool { return digestOf(t, cl.Nodes[2]) == digestOf(t, leader) },
		func() string { return "digest " + digestOf(t, cl.Nodes[2]) + ", the leader's " + digestOf(t, leader) })
	if n, err := leader.Client().Exists(ctx(t), "guarded").Result(); err != nil || n != 1 {
		t.Fatalf("the leader no longer holds the write the member was compared on: %d %v", n, err)
	}
	leader.Kill()
	next := cl.Leader()
	if next == leader {
		t.Fatal("no new leader")
	}
	if err := next.Client().Do(ctx(t), "CL.THROTTLE", "guarded", 5, 1, 3600).Err(); err != nil {
		t.Fatalf("a write after the failover: %v", err)
	}
}

// replaceArg is args with the value after flag replaced.
func replaceArg(args []string, flag, value string) []string {
	out := append([]string{}, args...)
	for i := range out {
		if out[i] == flag && i+1 < len(out) {
			out[i+1] = value
		}
	}
	return out
}
