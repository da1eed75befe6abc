// Command failoverbench measures how long a three-node sluice cluster takes
// to serve writes again after its leader is killed with SIGKILL: from the
// kill to the first CL.THROTTLE a new leader answers. It repeats the kill
// and prints each time, the median and the worst.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	bin := flag.String("bin", "bin/sluice", "sluice binary")
	kills := flag.Int("kills", 20, "leader kills")
	base := flag.Int("base-port", 7501, "client ports base+1..base+3 (Raft: +10000)")
	extra := flag.String("args", "", "more flags for every node, space-separated (e.g. the Raft timeouts)")
	flag.Parse()
	if err := run(*bin, *kills, *base, strings.Fields(*extra)); err != nil {
		fmt.Fprintln(os.Stderr, "failoverbench:", err)
		os.Exit(1)
	}
}

type node struct {
	id, addr, dir string
	cmd           *exec.Cmd
}

func run(bin string, kills, base int, extra []string) error {
	work, err := os.MkdirTemp("", "failoverbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	redis.SetLogger(quiet{})
	var nodes []*node
	peers := ""
	for i := 1; i <= 3; i++ {
		n := &node{id: "n" + strconv.Itoa(i), addr: "127.0.0.1:" + strconv.Itoa(base+i), dir: filepath.Join(work, "n"+strconv.Itoa(i))}
		nodes = append(nodes, n)
		if peers != "" {
			peers += ","
		}
		peers += n.id + "=" + n.addr
	}
	start := func(n *node) error {
		n.cmd = exec.Command(bin, append([]string{"--node-id", n.id, "--addr", n.addr, "--data-dir", n.dir, "--peers", peers, "--log-level", "error"}, extra...)...)
		return n.cmd.Start()
	}
	defer func() {
		for _, n := range nodes {
			if n.cmd != nil {
				n.cmd.Process.Kill()
				n.cmd.Wait()
			}
		}
	}()
	for _, n := range nodes {
		if err := start(n); err != nil {
			return err
		}
	}
	leader := func() *node {
		for _, n := range nodes {
			if n.cmd == nil {
				continue
			}
			c := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond, ReadTimeout: 200 * time.Millisecond})
			r, err := c.Do(context.Background(), "ROLE").Slice()
			c.Close()
			if err == nil && len(r) > 0 && r[0] == "master" {
				return n
			}
		}
		return nil
	}
	waitLeader := func(d time.Duration) *node {
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) {
			if l := leader(); l != nil {
				return l
			}
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	}
	if waitLeader(20*time.Second) == nil {
		return fmt.Errorf("no leader")
	}
	var times []time.Duration
	for k := range kills {
		l := waitLeader(20 * time.Second)
		if l == nil {
			return fmt.Errorf("kill %d: no leader", k)
		}
		killed := time.Now()
		l.cmd.Process.Kill()
		l.cmd.Wait()
		l.cmd = nil
		var took time.Duration
		var lastErr error
		for {
			if time.Since(killed) > 30*time.Second {
				return fmt.Errorf("kill %d: no new leader served within 30 s (last: %v)", k, lastErr)
			}
			ok := false
			for _, n := range nodes {
				if n.cmd == nil {
					continue
				}
				c := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond, ReadTimeout: 500 * time.Millisecond})
				err := c.Do(context.Background(), "CL.THROTTLE", "failover", 1000000, 1000000, 1).Err()
				c.Close()
				if err == nil {
					ok = true
					break
				}
				lastErr = fmt.Errorf("%s: %w", n.id, err)
			}
			if ok {
				took = time.Since(killed)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		times = append(times, took)
		fmt.Printf("kill %2d: %s was leader; served again after %v\n", k+1, l.id, took.Round(time.Millisecond))
		if err := start(l); err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond) // let it rejoin before the next kill
	}
	if len(times) == 0 {
		return nil
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	fmt.Printf("failover over %d kills: median %v, worst %v (targets: median < 1 s, worst < 2 s)\n",
		len(times), times[len(times)/2].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
	return nil
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
