// Command rlschaos checks that the rate limit service never answers a
// charged call as retryable. It starts a three-node sluice cluster with a
// gRPC door on every member, loads it with ShouldRateLimit calls spread
// over all members (followers forward to the leader), kills the leader
// with SIGKILL every few seconds and restarts it, then reads how much was
// charged. A call answered UNAVAILABLE must have charged nothing, so
//
//	charged - acknowledged <= answered UNKNOWN + DEADLINE_EXCEEDED
//
// must hold; the excess, if any, is the number of charged calls answered
// UNAVAILABLE. With -kills 0 it measures a steady cluster under many
// connections instead: calls per second, codes, and leader changes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

const rules = `domain: chaos
descriptors:
  - key: k
    rate_limit: {unit: day, requests_per_unit: 1000000000}
`

type node struct {
	id, addr, grpcAddr, dir string
	cmd                     *exec.Cmd
}

func main() {
	bin := flag.String("bin", "bin/sluice", "sluice binary")
	conns := flag.Int("conns", 60, "gRPC connections (one caller each), spread over the members")
	dur := flag.Duration("d", 40*time.Second, "how long to load")
	kills := flag.Int("kills", 5, "leader kills, spread over the run (0: none)")
	base := flag.Int("base-port", 7801, "client ports base+1..base+3, gRPC base+11..base+13 (Raft: +10000)")
	extra := flag.String("args", "", "more flags for every node, space-separated")
	flag.Parse()
	if err := run(*bin, *conns, *dur, *kills, *base, strings.Fields(*extra)); err != nil {
		fmt.Fprintln(os.Stderr, "rlschaos:", err)
		os.Exit(1)
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func run(bin string, conns int, dur time.Duration, kills, base int, extra []string) error {
	redis.SetLogger(quiet{})
	work, err := os.MkdirTemp("", "rlschaos-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	rulesFile := filepath.Join(work, "chaos.yaml")
	if err := os.WriteFile(rulesFile, []byte(rules), 0o644); err != nil {
		return err
	}
	var nodes []*node
	var peers []string
	for i := 1; i <= 3; i++ {
		n := &node{id: "n" + strconv.Itoa(i), addr: "127.0.0.1:" + strconv.Itoa(base+i),
			grpcAddr: "127.0.0.1:" + strconv.Itoa(base+10+i), dir: filepath.Join(work, "n"+strconv.Itoa(i))}
		nodes = append(nodes, n)
		peers = append(peers, n.id+"="+n.addr)
	}
	start := func(n *node) error {
		n.cmd = exec.Command(bin, append([]string{"--node-id", n.id, "--addr", n.addr, "--data-dir", n.dir,
			"--peers", strings.Join(peers, ","), "--grpc-addr", n.grpcAddr, "--rules", rulesFile, "--log-level", "error"}, extra...)...)
		return n.cmd.Start()
	}
	stop := func(n *node) {
		if n.cmd != nil {
			n.cmd.Process.Kill()
			n.cmd.Wait()
			n.cmd = nil
		}
	}
	defer func() {
		for _, n := range nodes {
			stop(n)
		}
	}()
	for _, n := range nodes {
		if err := start(n); err != nil {
			return err
		}
	}
	ask := func(n *node, args ...any) (any, error) {
		c := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second})
		defer c.Close()
		return c.Do(context.Background(), args...).Result()
	}
	leader := func() *node {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			for _, n := range nodes {
				if n.cmd == nil {
					continue
				}
				if r, err := ask(n, "ROLE"); err == nil && r.([]any)[0] == "master" {
					return n
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}
	term := func(n *node) int64 {
		r, err := ask(n, "RAFT", "INFO")
		if err != nil {
			return -1
		}
		m, _ := r.(map[any]any)
		t, _ := m["term"].(int64)
		return t
	}
	l := leader()
	if l == nil {
		return fmt.Errorf("no leader")
	}
	// Every member has its rules once a call through it is answered.
	clients := make([]pb.RateLimitServiceClient, conns)
	for i := range conns {
		cc, err := grpc.NewClient(nodes[i%3].grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer cc.Close()
		clients[i] = pb.NewRateLimitServiceClient(cc)
	}
	req := func(hits uint32) *pb.RateLimitRequest {
		return &pb.RateLimitRequest{Domain: "chaos", HitsAddend: hits, Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}}
	}
	var warm int
	for warm = 0; warm < 600; warm++ {
		// Every member answers with the rule's limit: the rules are in force.
		ok := 0
		for i := range min(3, conns) {
			r, err := clients[i].ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "chaos",
				Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "warm"}}}}})
			if err == nil && r.Statuses[0].CurrentLimit != nil {
				ok++
			}
		}
		if ok == min(3, conns) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t0 := term(l)
	var acked, unavailable, unknown, deadline, other, nolimit atomic.Int64

	end := time.Now().Add(dur)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			for time.Now().Before(end) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				resp, err := clients[i].ShouldRateLimit(ctx, req(1))
				cancel()
				if err == nil && resp.Statuses[0].CurrentLimit == nil {
					// Answered as if no rule matched: not a charge.
					nolimit.Add(1)
					continue
				}
				switch status.Code(err) {
				case codes.OK:
					acked.Add(1)
				case codes.Unavailable:
					unavailable.Add(1)
					time.Sleep(5 * time.Millisecond)
				case codes.Unknown:
					unknown.Add(1)
				case codes.DeadlineExceeded:
					deadline.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	for k := range kills {
		time.Sleep(dur / time.Duration(kills+1))
		if l = leader(); l == nil {
			break
		}
		stop(l)
		fmt.Printf("kill %d: %s\n", k+1, l.id)
		time.Sleep(time.Second)
		if err := start(l); err != nil {
			return err
		}
	}
	wg.Wait()
	if l = leader(); l == nil {
		return fmt.Errorf("no leader after the run")
	}
	t1 := term(l)
	// What was charged: one more call's remaining.
	var r *pb.RateLimitResponse
	for range 100 {
		if r, err = clients[0].ShouldRateLimit(context.Background(), req(1)); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("the final read: %w", err)
	}
	charged := int64(1_000_000_000) - int64(r.Statuses[0].LimitRemaining) - 1
	total := acked.Load() + unavailable.Load() + unknown.Load() + deadline.Load() + other.Load() + nolimit.Load()
	fmt.Printf("%d connections over %v, %d leader kills: %d calls (%.0f/s): OK %d, UNAVAILABLE %d (%.2f%%), UNKNOWN %d, DEADLINE_EXCEEDED %d, other %d, OK without the rule's limit %d\n",
		conns, dur, kills, total, float64(total)/dur.Seconds(), acked.Load(), unavailable.Load(),
		100*float64(unavailable.Load())/float64(max(total, 1)), unknown.Load(), deadline.Load(), other.Load(), nolimit.Load())
	fmt.Printf("term %d -> %d; charged %d, acknowledged %d: %d charged without an OK, %d answered UNKNOWN or DEADLINE_EXCEEDED\n",
		t0, t1, charged, acked.Load(), charged-acked.Load(), unknown.Load()+deadline.Load())
	if excess := charged - acked.Load() - unknown.Load() - deadline.Load(); excess > 0 {
		return fmt.Errorf("at least %d charged calls were answered UNAVAILABLE", excess)
	}
	fmt.Println("ok: no charged call was answered retryable")
	return nil
}
