package tests

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/member"
	"github.com/sluice-rl/sluice/slot"
)

// AsMember sends req to group g's leader on its member port, as another
// member would (secret: the cluster's, nil for none), and returns its
// answer.
func (sc *ShardedCluster) AsMember(t *testing.T, g int, secret []byte, req *machine.PlacementRequest) (machine.PlacementResult, error) {
	t.Helper()
	leader := sc.Leader(t, g)
	j := 0
	for i, s := range sc.Groups[g] {
		if s == leader {
			j = i
		}
	}
	c := member.NewClient(member.ClientConfig{Secret: secret})
	defer c.Close()
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Place(cctx, member.Addr{Port: sc.RaftAddrs[g][j], Group: fmt.Sprintf("g%d", g+1)}, req)
}

// asConfig is a placement request applying a configuration command.
func asConfig(words ...string) *machine.PlacementRequest {
	req := &machine.PlacementRequest{Kind: machine.PlaceApply}
	for _, w := range words {
		req.Config = append(req.Config, []byte(w))
	}
	return req
}

// Issue #44: what only a member may ask is not a client's to ask. Every
// internal command, sent on every member's RESP door (alone and inside
// MULTI), is an unknown command in Redis' words and changes no state; none
// is listed by COMMAND. The forged import the issue found (g2 taking g1's
// slots, then a key admitted twice its limit) is refused. The members'
// own calls cross the member port, which hears no one without the
// cluster's secret: a check across both groups is still all or nothing.
func TestInternalCommandsOnlyOnTheMemberPort(t *testing.T) {
	secretText := "a cluster secret of some length"
	secret := writeSecret(t, secretText)
	sc := StartShardedCluster(t, 3, [][]string{{"0-8191"}, {"8192-16383"}},
		"--cluster-secret-file", secret, "--rules", writeRules(t, "x.yaml", crossRules))
	waitShardedRules(t, sc, "x", 2)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })

	// A key in g1's slots, and the state every member holds.
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("k%d", i); slot.Of([]byte(k)) < 8192 {
			key = k
		}
	}
	for range 3 {
		if err := cc.Do(ctx(t), "CL.THROTTLE", key, 9, 1, 86400, 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	offsets := regexp.MustCompile(`replication-offset \d+ `)
	// The state a forged command could change: the slots, groups and
	// jobs (CLUSTER SHARDS), the keys, the reservations (the key's own
	// state: its limit, below). Not DEBUG DIGEST:
	// it covers the applied instant, which an idle leader's tick moves
	// every second (under load, between the two reads).
	state := func() string {
		var b strings.Builder
		for g, group := range sc.Groups {
			for _, s := range group {
				eventually(t, "the group's members agree", func() bool { return digestOf(t, s) == digestOf(t, sc.Leader(t, g)) })
				c := s.Client()
				// Replication offsets move with any entry (the idle
				// tick's too).
				shards := offsets.ReplaceAllString(c.Do(ctx(t), "CLUSTER", "SHARDS").String(), "")
				fmt.Fprintf(&b, "%s keys=%d reserved=%s held=%s\n", shards, c.DBSize(ctx(t)).Val(),
					infoField(t, c, "stats", "reservations_reserved"), infoField(t, c, "stats", "reservations_held"))
			}
		}
		return b.String()
	}
	// The log's apply level is raised once every member reports it (an
	// entry of each group's own): wait for it, or it lands between the
	// two states.
	for _, group := range sc.Groups {
		awaitApplyLevel(t, group...)
	}
	before := state()
	g2 := sc.Leader(t, 1)
	forged := [][]any{
		{"SLUICE.IMPORT", 100, "digest", "", "0-8191"},
		{"SLUICE.OWN", 100, "0-16383"},
		{"SLUICE.CUT", "job", 100, "0-8191"},
		{"SLUICE.MOVED", "job", 1, 1},
		{"SLUICE.JOB", "CANCEL"},
		{"SLUICE.GROUPS", "DEL", "g1"},
		{"RL.PART", "CANCEL", "x", "some-id"},
		{"RL.PART", "APPLY", "SLUICE.GROUPS", "DEL", "g1"},
		{"RL.PART", "RESERVE", "digest", "id", 10, "RL.CHECK", "x", "DESCRIPTOR", "user", "u"},
		{"RL.PART", "DECIDE", "digest", "RL.CHECK", "x", "DESCRIPTOR", "user", "u"},
		{"RL.PART", "DIGEST"},
	}
	for _, group := range sc.Groups {
		for _, s := range group {
			c := s.Client()
			for _, args := range forged {
				err := c.Do(ctx(t), args...).Err()
				want := fmt.Sprintf("ERR unknown command '%s', with args beginning with: '%v'", args[0], args[1])
				if err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Fatalf("%s %v on %s: %v, want %q…", args[0], args[1:], s.Addr, err, want)
				}
			}
			// Inside a transaction: refused as it is queued, and the
			// transaction with it.
			pipe := c.TxPipeline()
			pipe.Do(ctx(t), "RL.PART", "DIGEST")
			pipe.Do(ctx(t), "CL.THROTTLE", key, 9, 1, 86400, 1)
			if _, err := pipe.Exec(ctx(t)); err == nil || !strings.Contains(err.Error(), "EXECABORT") {
				t.Fatalf("MULTI with RL.PART: %v", err)
			}
		}
	}
	names, err := g2.Client().Do(ctx(t), "COMMAND", "LIST").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "sluice.") || n == "rl.part" {
			t.Fatalf("COMMAND LIST names %s", n)
		}
	}
	if v, err := g2.Client().Do(ctx(t), "COMMAND", "INFO", "RL.PART", "SLUICE.IMPORT").Slice(); err != nil || len(v) != 2 || v[0] != nil || v[1] != nil {
		t.Fatalf("COMMAND INFO of internal commands: %v %v", v, err)
	}
	if after := state(); after != before {
		t.Fatalf("a refused internal command changed state:\nbefore %s\nafter %s", before, after)
	}
	// The attack, after it: the key's limit holds across groups.
	admitted := 3
	for range 20 {
		v, err := cc.Do(ctx(t), "CL.THROTTLE", key, 9, 1, 86400, 1).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		if v[0] == 0 {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("%d admitted against a limit of 10", admitted)
	}

	// The member port hears a member with the secret, and no one else.
	for _, s := range [][]byte{nil, []byte("not this cluster's secret, long")} {
		if v, err := sc.AsMember(t, 1, s, &machine.PlacementRequest{Kind: machine.PlaceDigest, Domain: "x"}); err == nil {
			t.Fatalf("the member port answered a caller without the secret: %v", v)
		} else if !member.NothingApplied(err) && !strings.Contains(err.Error(), "unknown") {
			t.Fatalf("a caller without the secret: %v", err)
		}
	}
	d1, err := sc.AsMember(t, 0, []byte(secretText), &machine.PlacementRequest{Kind: machine.PlaceDigest, Domain: "x"})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := sc.AsMember(t, 1, []byte(secretText), &machine.PlacementRequest{Kind: machine.PlaceDigest, Domain: "x"})
	if err != nil || d1 != d2 || d1.Digest == "" || d1.Digest == machine.NoRules {
		t.Fatalf("the groups' digests over the member port: %v %v %v", d1, d2, err)
	}
	if _, err := sc.AsMember(t, 1, []byte(secretText), asConfig("CL.THROTTLE", "k", "9", "1", "86400", "1")); !errors.Is(err, member.ErrRefused) {
		t.Fatalf("a client command as configuration on the member port: %v", err)
	}

	// Checks across both groups cross the member port: all or nothing.
	args := []any{"RL.CHECK", "x", "DESCRIPTOR", "endpoint", "e"}
	for i := range 8 {
		args = append(args, "DESCRIPTOR", "user", fmt.Sprintf("m%d", i))
	}
	for i := range 5 {
		v, err := cc.Do(ctx(t), args...).Slice()
		if err != nil {
			t.Fatalf("check %d across groups: %v", i, err)
		}
		if want := int64(0); i >= 3 {
			want = 1
			if v[0] != want {
				t.Fatalf("check %d: %v, want refused", i, v)
			}
		} else if v[0] != want {
			t.Fatalf("check %d: %v, want admitted", i, v)
		}
	}
}
