package tests

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/netproxy"
)

// A follower forwards a call; the leader charges it, and the connection
// breaks before the answer comes back. The call must be answered UNKNOWN
// (HTTP: 500 saying so), never UNAVAILABLE, which Envoy and gRPC retry
// policies read as "nothing happened". A call whose dial to the leader
// fails is UNAVAILABLE, and charges nothing.
func TestRLSForwardBrokenAfterWriteIsUnknown(t *testing.T) {
	rules := writeRules(t, "edge.yaml", rlsClusterRules)
	cl := NewCluster(t, 3)
	// proxies[j] stands before node j's RESP port: every other member
	// forwards to node j through it.
	proxies := make([]*netproxy.Proxy, len(cl.Nodes))
	for j, s := range cl.Nodes {
		proxies[j] = newProxy(t, s.Addr)
	}
	grpcAddrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	httpAddrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cl.Start(func(i int, raft []string) []string {
		var peers []string
		for j, s := range cl.Nodes {
			addr := s.Addr
			if j != i {
				addr = proxies[j].Addr()
			}
			peers = append(peers, fmt.Sprintf("n%d=%s@%s", j+1, addr, raft[j]))
		}
		return []string{"--grpc-addr", grpcAddrs[i], "--http-addr", httpAddrs[i], "--peers", strings.Join(peers, ",")}
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

	proxies[li].SwallowReplies(true)
	_, err := viaFollower.ShouldRateLimit(ctx(t), rlsRequest("edge", 1, "path=/charged"))
	if status.Code(err) != codes.Unknown {
		t.Fatalf("a forwarded call whose answer was lost: %v, want UNKNOWN", err)
	}
	// The HTTP door alike, over a connection the follower already holds
	// (a new one's set-up could be what breaks).
	proxies[li].SwallowReplies(false)
	body := `{"domain":"edge","hits_addend":1,"descriptors":[{"entries":[{"key":"path","value":"/charged"}]}]}`
	resp, err := http.Post("http://"+httpAddrs[fi]+"/json", "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /json through the follower: %v %v", resp, err)
	}
	resp.Body.Close()
	proxies[li].SwallowReplies(true)
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

	// The leader's door shut: the dial fails, nothing reaches it.
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

// A follower forwards over TLS when the members speak it (its own dialer
// does the handshake: go-redis' is replaced to mark failed dials unsent).
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
}

// A follower forwarding to a leader whose maxclients is full is turned
// away before the leader reads the call: the caller gets UNAVAILABLE
// (nothing charged, safe to retry), never UNKNOWN, and the counter did not
// move.
func TestRLSForwardRefusedAtTheLeadersDoorIsUnavailable(t *testing.T) {
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
	for range 3 {
		_, err := viaFollower.ShouldRateLimit(ctx(t), rlsRequest("edge", 1, "path=/refused"))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("a call forwarded to a leader with maxclients full: %v (want UNAVAILABLE)", err)
		}
	}
	for _, c := range held {
		c.Close()
	}
	eventually(t, "the leader has room again", func() bool { return admin.Ping(ctx(t)).Err() == nil })
	r, err := admin.Do(ctx(t), "RL.CHECK", "edge", "COST", 0, "DESCRIPTOR", "path", "/refused").Slice()
	if err != nil || r[1].(int64) != r[2].(int64) {
		t.Fatalf("the refused calls' counter: %v %v (want untouched)", r, err)
	}
}
