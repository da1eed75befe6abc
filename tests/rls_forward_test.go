package tests

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/netproxy"
	"github.com/sluice-rl/sluice/member"
)

// A follower forwards a call to the leader's member port; the leader
// charges it, and the connection breaks before the answer comes back. The
// call must be answered UNKNOWN (HTTP: 500 saying so), never UNAVAILABLE,
// which Envoy and gRPC retry policies read as "nothing happened". A call
// whose dial to the leader's member port fails is UNAVAILABLE, and
// charges nothing.
func TestRLSForwardBrokenAfterWriteIsUnknown(t *testing.T) {
	rules := writeRules(t, "edge.yaml", rlsClusterRules)
	cl := NewCluster(t, 3)
	// proxies[j] stands before node j's member port: every other member
	// dials node j through it (Raft and member calls alike).
	proxies := make([]*netproxy.Proxy, len(cl.Nodes))
	for j := range cl.Nodes {
		proxies[j] = newProxy(t, cl.RaftAddrs[j])
	}
	grpcAddrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	httpAddrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cl.Start(func(i int, _ []string) []string {
		var via []string
		for j := range cl.Nodes {
			if j != i {
				via = append(via, fmt.Sprintf("n%d=%s", j+1, proxies[j].Addr()))
			}
		}
		return []string{"--grpc-addr", grpcAddrs[i], "--http-addr", httpAddrs[i], "--raft-dial-via", strings.Join(via, ",")}
	}, "--rules", rules)
	leader := cl.Leader()
	li := indexOf(cl, leader)
	fi := indexOf(cl, cl.Followers(leader)[0])
	viaFollower, _ := rlsClient(t, grpcAddrs[fi])
	viaLeader, _ := rlsClient(t, grpcAddrs[li])
	eventually(t, "a forwarded call answered", func() bool {
		resp, err := viaFollower.ShouldRateLimit(ctx(t), rlsRequest("edge", 1, "path=/warm"))
		return err == nil && resp.Statuses[0].CurrentLimit != nil
	})

	// The reply to the call on the member port is lost (armed by the
	// call's own bytes, so HTTP/2's unasked frames before it do not cut
	// the connection while nothing was sent).
	proxies[li].SwallowReplyTo("/charged")
	_, err := viaFollower.ShouldRateLimit(ctx(t), rlsRequest("edge", 1, "path=/charged"))
	if status.Code(err) != codes.Unknown {
		t.Fatalf("a forwarded call whose answer was lost: %v, want UNKNOWN", err)
	}
	// The HTTP door alike, over a connection the follower already holds
	// (a new one's set-up could be what breaks). The lost answer may have
	// broken the connection it came on: until the follower has a new one,
	// calls are UNAVAILABLE — not sent, not charged.
	proxies[li].SwallowReplies(false)
	body := `{"domain":"edge","hits_addend":1,"descriptors":[{"entries":[{"key":"path","value":"/charged"}]}]}`
	eventually(t, "POST /json through the follower answered", func() bool {
		resp, err := http.Post("http://"+httpAddrs[fi]+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("POST /json through the follower: HTTP %d", resp.StatusCode)
		}
		return resp.StatusCode == http.StatusOK
	})
	var resp *http.Response
	proxies[li].SwallowReplyTo("/charged")
	resp, err = http.Post("http://"+httpAddrs[fi]+"/json", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(msg), "outcome is unknown") {
		t.Fatalf("POST /json whose answer was lost: HTTP %d %s, want 500 (outcome unknown), never 503", resp.StatusCode, msg)
	}
	// All three were charged: the leader counts them.
	got, err := viaLeader.ShouldRateLimit(ctx(t), rlsRequest("edge", 1, "path=/charged"))
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Statuses[0].LimitRemaining; r != 996 {
		t.Fatalf("remaining %d after two lost answers, one answered and this call, want 996", r)
	}

	// The leader's member port shut: the dial fails, nothing reaches it.
	proxies[li].Close()
	_, err = viaFollower.ShouldRateLimit(ctx(t), rlsRequest("edge", 1, "path=/charged"))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a call whose dial failed: %v, want UNAVAILABLE", err)
	}
	got, err = viaLeader.ShouldRateLimit(ctx(t), rlsRequest("edge", 1, "path=/charged"))
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Statuses[0].LimitRemaining; r != 995 {
		t.Fatalf("remaining %d, want 995: the call answered UNAVAILABLE was charged", r)
	}
}

// A follower forwards over TLS when the members speak it: with
// --tls-cert-file the member port (Raft and member calls) is TLS too.
func TestRLSForwardOverTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	rules := writeRules(t, "edge.yaml", rlsClusterRules)
	cl := NewCluster(t, 3)
	grpcAddrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	for i, s := range cl.Nodes {
		s.Args = []string{"--data-dir", s.DataDir, "--node-id", fmt.Sprintf("n%d", i+1), "--peers", cl.Peers,
			"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--requirepass", "pw", "--rules", rules, "--grpc-addr", grpcAddrs[i]}
		s.Start()
		t.Cleanup(s.Kill)
	}
	tlsClient := func(s *Server) *redis.Client {
		return s.Client(func(o *redis.Options) {
			o.Password, o.MaxRetries = "pw", -1
			o.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		})
	}
	follower := -1
	eventually(t, "a leader over TLS", func() bool {
		leaders := 0
		for i, s := range cl.Nodes {
			r, err := tlsClient(s).Do(ctx(t), "ROLE").Slice()
			if err != nil {
				return false
			}
			if r[0] == "master" {
				leaders++
			} else {
				follower = i
			}
		}
		return leaders == 1
	})
	conn, err := grpc.NewClient(grpcAddrs[follower], grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := pb.NewRateLimitServiceClient(conn)
	authed := metadata.AppendToOutgoingContext(ctx(t), "authorization", "Bearer pw")
	var remaining []uint32
	eventually(t, "two calls forwarded over TLS, one counter", func() bool {
		resp, err := c.ShouldRateLimit(authed, rlsRequest("edge", 1, "path=/tls"))
		if err != nil || resp.Statuses[0].CurrentLimit == nil {
			return false
		}
		remaining = append(remaining, resp.Statuses[0].LimitRemaining)
		return len(remaining) >= 2
	})
	if n := len(remaining); remaining[n-1] != remaining[n-2]-1 {
		t.Fatalf("remaining %v: the forwarded calls did not count on one counter", remaining)
	}
	// The member port speaks TLS (Raft and member calls): a caller
	// trusting the certificate is answered, a plain one is not.
	at := member.Addr{Port: cl.RaftAddrs[follower], Group: "sluice"}
	for _, cfg := range []*tls.Config{{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil} {
		mc := member.NewClient(member.ClientConfig{TLS: cfg})
		mctx, cancel := context.WithTimeout(ctx(t), 3*time.Second)
		rep, err := mc.Report(mctx, at)
		cancel()
		mc.Close()
		if (err == nil) != (cfg != nil) {
			t.Fatalf("a member report with TLS %v: %+v %v", cfg != nil, rep, err)
		}
	}
}

// A follower forwards on the leader's member port, not its client door:
// the leader's clients filling its maxclients turn no forwarded call away,
// and each is charged once.
func TestRLSForwardNotTurnedAwayByTheLeadersClients(t *testing.T) {
	cl, grpcAddrs := startRLSCluster(t)
	leader := cl.Leader()
	fi := indexOf(cl, cl.Followers(leader)[0])
	viaFollower, _ := rlsClient(t, grpcAddrs[fi])
	admin := leader.Client()
	connected := infoInt(t, admin, "clients", "connected_clients")
	if err := admin.ConfigSet(ctx(t), "maxclients", strconv.FormatInt(connected+5, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	held := holdConns(t, leader.Addr, 20, []byte("PING\r\n"), func(r *bufio.Reader) bool {
		l, err := r.ReadString('\n')
		return err == nil && l == "+PONG\r\n"
	})
	if len(held) == 0 {
		t.Fatal("no connection held the leader's free slots")
	}
	eventually(t, "the leader applied its rules", func() bool {
		c, _ := rlsClient(t, grpcAddrs[indexOf(cl, leader)])
		resp, err := c.ShouldRateLimit(ctx(t), rlsRequest("edge", 0, "path=warmup"))
		return err == nil && resp.Statuses[0].CurrentLimit != nil
	})
	var last uint32
	for i := range 3 {
		resp, err := viaFollower.ShouldRateLimit(ctx(t), rlsRequest("edge", 1, "path=/full"))
		if err != nil {
			t.Fatalf("a call forwarded while the leader's clients are full: %v", err)
		}
		if r := resp.Statuses[0].LimitRemaining; i > 0 && r != last-1 {
			t.Fatalf("remaining %d after %d, want one less", r, last)
		}
		last = resp.Statuses[0].LimitRemaining
	}
	for _, c := range held {
		c.Close()
	}
}
