package crossgroup

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/member"
	"github.com/sluice-rl/sluice/shardmap"
)

const threeGroups = `epoch: 1
groups:
  - id: g1
    slots: ["0-5000"]
    members: {a1: "127.0.0.1:7001@127.0.0.1:17001"}
  - id: g2
    slots: ["5001-10000"]
    members: {b1: "127.0.0.1:7002@127.0.0.1:17002"}
  - id: g3
    slots: ["10001-16383"]
    members: {c1: "127.0.0.1:7003@127.0.0.1:17003"}
`

// flakyMembers fail the first fails calls to each member port.
type flakyMembers struct {
	mu    sync.Mutex
	fails map[string]int
	calls map[string]int
}

func (f *flakyMembers) Place(_ context.Context, to member.Addr, _ *machine.PlacementRequest) (machine.PlacementResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[to.Port]++
	if f.calls[to.Port] <= f.fails[to.Port] {
		return machine.PlacementResult{}, errors.New("the call was lost")
	}
	return machine.PlacementResult{}, nil
}

func (f *flakyMembers) Part(context.Context, member.Addr, *machine.PartRequest) (machine.PartResult, error) {
	return machine.PartResult{}, member.ErrRefused
}

// mustNew is New that fails the test on an invalid config.
func mustNew(t *testing.T, cfg Config) *Coordinator {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A config without what a coordinator calls is refused, naming it.
func TestConfigValidate(t *testing.T) {
	m, _ := shardmap.Parse([]byte(threeGroups))
	r, _ := shardmap.NewRouter(m, "g1")
	full := Config{Router: r, Machine: machine.New(machine.Options{}), Members: &flakyMembers{}, MemberAt: byClientAddr,
		OwnLeader: func() (string, bool) { return "", false }}
	if _, err := New(full); err != nil {
		t.Fatal(err)
	}
	for name, breakIt := range map[string]func(*Config){
		"Router":      func(c *Config) { c.Router = nil },
		"Machine":     func(c *Config) { c.Machine = nil },
		"Members":     func(c *Config) { c.Members = nil },
		"MemberAt":    func(c *Config) { c.MemberAt = nil },
		"OwnLeader":   func(c *Config) { c.OwnLeader = nil },
		"Timeout":     func(c *Config) { c.Timeout = -time.Second },
		"FinishRetry": func(c *Config) { c.FinishRetry = -time.Second },
	} {
		c := full
		breakIt(&c)
		if _, err := New(c); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: %v", name, err)
		}
	}
}

// byClientAddr is MemberAt for tests: a member's client address names it.
func byClientAddr(addr string) (member.Addr, bool) { return member.Addr{Port: addr, Group: "g"}, true }

// A configuration command a group did not take is sent to it again, and
// only to it; a group that keeps failing is named after three attempts.
func TestPropagateSendsAgain(t *testing.T) {
	m, err := shardmap.Parse([]byte(threeGroups))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := shardmap.NewRouter(m, "g1")
	r.SetLeader(1, "127.0.0.1:7002")
	r.SetLeader(2, "127.0.0.1:7003")
	caller := &flakyMembers{fails: map[string]int{"127.0.0.1:7002": 2}, calls: map[string]int{}}
	c := mustNew(t, Config{Router: r, Machine: machine.New(machine.Options{}), Members: caller, MemberAt: byClientAddr,
		OwnLeader: func() (string, bool) { return "127.0.0.1:7001", true }})
	args := [][]byte{[]byte("RL.SCALE"), []byte("api"), []byte("0.5")}
	if err := c.Propagate(context.Background(), args); err != nil {
		t.Fatalf("two lost calls to g2: %v", err)
	}
	if caller.calls["127.0.0.1:7002"] != 3 || caller.calls["127.0.0.1:7003"] != 1 {
		t.Fatalf("calls %v: g2 three times, g3 once", caller.calls)
	}
	caller.fails["127.0.0.1:7003"], caller.calls = 100, map[string]int{}
	err = c.Propagate(context.Background(), args)
	if err == nil || !strings.Contains(err.Error(), "group g3") || strings.Contains(err.Error(), "group g2") {
		t.Fatalf("g3 never takes it: %v", err)
	}
	if caller.calls["127.0.0.1:7003"] != propagateAttempts {
		t.Fatalf("calls %v", caller.calls)
	}
}
