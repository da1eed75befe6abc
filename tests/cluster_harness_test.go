package tests

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a replicated sluice cluster of processes on loopback.
type Cluster struct {
	t     testing.TB
	Nodes []*Server
	// Peers is the --peers list every node was given; RaftAddrs are the
	// nodes' Raft addresses, in order.
	Peers     string
	RaftAddrs []string
}

// StartCluster starts n replicated nodes (ids n1…) and waits until one
// leads. extra flags go to every node; perNode(i, raftAddrs) adds flags for
// node i, given every node's Raft address.
func StartCluster(t testing.TB, n int, perNode func(i int, raftAddrs []string) []string, extra ...string) *Cluster {
	t.Helper()
	c := NewCluster(t, n)
	c.Start(perNode, extra...)
	return c
}

// NewCluster picks the addresses of n nodes (ids n1…) without starting
// them: a test that needs them first (to put a proxy before one) starts
// the cluster with Start.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	var peers []string
	for i := range n {
		s := &Server{t: t, Addr: freeAddr(t), DataDir: t.TempDir()}
		c.Nodes = append(c.Nodes, s)
		c.RaftAddrs = append(c.RaftAddrs, freeAddr(t))
		peers = append(peers, fmt.Sprintf("n%d=%s@%s", i+1, s.Addr, c.RaftAddrs[i]))
	}
	c.Peers = strings.Join(peers, ",")
	return c
}

// Start starts the nodes NewCluster placed and waits until one leads.
func (c *Cluster) Start(perNode func(i int, raftAddrs []string) []string, extra ...string) {
	t := c.t
	t.Helper()
	for i, s := range c.Nodes {
		s.Args = append([]string{"--enable-debug-command", "--data-dir", s.DataDir, "--node-id", fmt.Sprintf("n%d", i+1),
			"--peers", c.Peers}, extra...)
		if perNode != nil {
			s.Args = append(s.Args, perNode(i, c.RaftAddrs)...)
		}
		s.Start()
		t.Cleanup(s.Kill)
	}
	c.Leader()
}

// Logs is every node's log so far, for a failure's message.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for i, s := range c.Nodes {
		fmt.Fprintf(&b, "== n%d (%s) ==\n%s\n", i+1, s.Addr, s.Logs())
	}
	return b.String()
}

// role asks a node its ROLE; "" when it does not answer.
func role(t testing.TB, s *Server) string {
	if s.cmd == nil {
		return ""
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second, TLSConfig: s.TLS})
	defer c.Close()
	v, err := c.Do(ctx(t), "ROLE").Slice()
	if err != nil || len(v) == 0 {
		return ""
	}
	r, _ := v[0].(string)
	return r
}

// Leader waits until exactly one running node says it is master, and
// returns it.
func (c *Cluster) Leader() *Server {
	c.t.Helper()
	var leader *Server
	eventually(c.t, "a leader", func() bool {
		leader = nil
		for _, s := range c.Nodes {
			if role(c.t, s) == "master" {
				if leader != nil {
					return false
				}
				leader = s
			}
		}
		return leader != nil
	})
	return leader
}

// Followers are the running nodes other than leader.
func (c *Cluster) Followers(leader *Server) []*Server {
	var out []*Server
	for _, s := range c.Nodes {
		if s != leader && s.cmd != nil {
			out = append(out, s)
		}
	}
	return out
}

// Addrs are every node's client address, for a cluster client's seeds.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.Nodes {
		out = append(out, s.Addr)
	}
	return out
}

// Client is a go-redis ClusterClient over every node, following MOVED.
func (c *Cluster) Client() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRedirects: 16,
		DialTimeout: time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: time.Second,
		MinRetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 100 * time.Millisecond})
	c.t.Cleanup(func() { cc.Close() })
	return cc
}

// digestOf is a node's DEBUG DIGEST.
func digestOf(t testing.TB, s *Server) string {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	d, _ := c.Do(ctx(t), "DEBUG", "DIGEST").Text()
	return d
}

// SameDigests waits until every running node holds the same state.
func (c *Cluster) SameDigests() string {
	c.t.Helper()
	var d string
	eventually(c.t, "the same digest on every node", func() bool {
		d = ""
		for _, s := range c.Nodes {
			if s.cmd == nil {
				continue
			}
			got := digestOf(c.t, s)
			if got == "" || (d != "" && got != d) {
				return false
			}
			d = got
		}
		return true
	})
	return d
}

// quietLogger drops go-redis' own log lines: cluster tests kill nodes on
// purpose, and every refused dial would be logged.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietLogger{}) }

// rawExchange writes req in one write and reads until it has seen replies
// top-level replies (counted by their first line: simple or error strings,
// integers, or arrays of integers) or a second passes.
func rawExchange(t testing.TB, addr, req string, replies int) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var out []byte
	buf := make([]byte, 4096)
	for countReplies(out) < replies {
		n, err := conn.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			break
		}
	}
	return string(out)
}

// countReplies counts complete top-level replies of the simple shapes
// rawExchange expects.
func countReplies(b []byte) int {
	lines := strings.Split(string(b), "\r\n")
	n, pending := 0, 0
	for _, l := range lines[:len(lines)-1] {
		switch {
		case pending > 0:
			pending--
			if pending == 0 {
				n++
			}
		case strings.HasPrefix(l, "*"):
			k, _ := strconv.Atoi(l[1:])
			if k <= 0 {
				n++
			} else {
				pending = k
			}
		default:
			n++
		}
	}
	return n
}
