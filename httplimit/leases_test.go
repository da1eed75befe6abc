package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The size a lease asks for: the rate asked at, for the ttl.
func TestWantFor(t *testing.T) {
	for _, c := range []struct {
		asked   int64
		elapsed time.Duration
		ttl     int64
		want    int64
	}{
		{0, time.Second, 10, 0},
		{5, time.Second, 10, 50},
		{5, 10 * time.Second, 10, 5},
		{5, time.Minute, 10, 5}, // at least what was asked
		{1, 0, 10, 10000},       // no time elapsed: a millisecond
		{1 << 40, time.Nanosecond, 86400, 4294967295},
		{3, 2 * time.Second, 5, 7},
	} {
		if got := wantFor(c.asked, c.elapsed, c.ttl); got != c.want {
			t.Errorf("wantFor(%d, %v, %d) = %d, want %d", c.asked, c.elapsed, c.ttl, got, c.want)
		}
	}
}

// leaseDoer answers RL.CHECK as a rule of 1e9 a minute would, and
// RL.LEASE with 1e9 units for a minute: the lease never runs out in a
// benchmark.
type leaseDoer struct{}

func (leaseDoer) Do(ctx context.Context, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	switch {
	case args[0] == "RL.CHECK":
		cmd.SetVal([]any{int64(0), int64(1e9), int64(1e9 - 1), int64(-1), int64(60), "big", int64(60)})
	case args[1] == "RETURN":
		cmd.SetVal([]any{})
	default:
		cmd.SetVal([]any{int64(1e9), int64(60000), int64(48000)})
	}
	return cmd
}

// A request decided from a lease: the Limit's own cost, in process.
func BenchmarkLeasesLocalDecision(b *testing.B) {
	l, err := WithLeases(Rules{Domain: "d", Descriptors: func(_ *http.Request, key string) [][]Entry {
		return [][]Entry{{{Key: "route", Value: key}}}
	}}, LeaseOptions{Holder: "bench", TTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(context.Background())
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	ctx := context.Background()
	if _, err := l.Check(ctx, leaseDoer{}, req, "/api"); err != nil {
		b.Fatal(err)
	}
	l.wg.Wait() // the first lease
	b.ReportAllocs()
	for b.Loop() {
		d, err := l.Check(ctx, leaseDoer{}, req, "/api")
		if err != nil || d.Limited || d.Policy.Name != "big" {
			b.Fatal(d, err)
		}
	}
}

// returnFails is leaseDoer whose RL.LEASE RETURN cannot reach sluice, and
// whose leases are of 5 units for 10 s.
type returnFails struct{}

func (returnFails) Do(ctx context.Context, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	switch {
	case args[0] == "RL.CHECK":
		cmd.SetVal([]any{int64(0), int64(100), int64(99), int64(-1), int64(60), "r", int64(60)})
	case args[1] == "RETURN":
		cmd.SetErr(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	default:
		cmd.SetVal([]any{int64(5), int64(10000), int64(8000)})
	}
	return cmd
}

// oneDescriptorLeases are leases of 10 s for domain d, every request the
// descriptor k=v, on the clock *now.
func oneDescriptorLeases(t *testing.T, now *time.Time) *Leases {
	t.Helper()
	l, err := WithLeases(Rules{Domain: "d", Descriptors: func(*http.Request, string) [][]Entry {
		return [][]Entry{{{Key: "k", Value: "v"}}}
	}}, LeaseOptions{Holder: "h", TTL: 10 * time.Second, Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A renewal whose return cannot reach sluice (no connection: it never
// left) leaves what the lease held this process's: the lease is still
// held there, so its units are still used here.
func TestLeaseKeptWhenItsReturnFails(t *testing.T) {
	now := time.Unix(1e9, 0)
	l := oneDescriptorLeases(t, &now)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	ctx := context.Background()
	check := func() bool {
		d, err := l.Check(ctx, returnFails{}, req, "")
		if err != nil {
			t.Fatal(err)
		}
		return !d.Limited
	}
	check() // per request; the lease is asked for
	l.wg.Wait()
	now = now.Add(time.Second)
	for range 2 { // 3 left after
		if !check() {
			t.Fatal("the lease of 5 refused")
		}
	}
	now = now.Add(8 * time.Second) // past its refresh: a renewal starts
	if !check() {                  // 2 left, and the renewal's return fails
		t.Fatal("refused with 3 left")
	}
	l.wg.Wait()
	admitted := 0
	for range 4 {
		if check() {
			admitted++
		}
	}
	if admitted != 2 {
		t.Fatalf("after a failed return, %d of the 2 units left were admitted", admitted)
	}
}

// Past maxLeases descriptors, a new one makes room by forgetting those
// whose leases ended and that are not being renewed — never one whose
// renewal is on its way: its grant would land on a lease no longer held
// here, neither used nor returned (kept charged to its ttl), and the next
// request would ask for a second one.
func TestForgetIdleKeepsLeasesBeingRenewed(t *testing.T) {
	now := time.Unix(1e9, 0)
	l := oneDescriptorLeases(t, &now)
	ended := now.Add(-time.Second)
	for i := range maxLeases {
		l.held["d"+strconv.Itoa(i)] = &heldLease{until: ended, renewing: i%2 == 0, known: true}
	}
	if !l.forgetIdle(now) {
		t.Fatal("no room made of ended leases")
	}
	for name, h := range l.held {
		if !h.renewing {
			t.Fatalf("%s: an ended lease not being renewed kept", name)
		}
	}
	if len(l.held) != maxLeases/2 {
		t.Fatalf("%d of the %d leases being renewed kept", len(l.held), maxLeases/2)
	}
}

// replyLost is a sluice whose first RL.LEASE RETURN lands but whose reply
// is lost (a timeout): it counts the units it refunded and the grants it
// made, as the server would (a return naming a grant no longer held ends
// nothing).
type replyLost struct {
	mu       sync.Mutex
	returns  []string // each RETURN's words after UNUSED
	refunded int64
	grant    int64 // the grant held (0: none)
	granted  int64
	next     int64
}

func (s *replyLost) Do(ctx context.Context, args ...any) *redis.Cmd {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := redis.NewCmd(ctx, args...)
	switch {
	case args[0] == "RL.CHECK":
		cmd.SetVal([]any{int64(0), int64(100), int64(99), int64(-1), int64(60), "r", int64(60)})
	case args[1] == "RETURN":
		s.returns = append(s.returns, strings.TrimSpace(fmt.Sprintln(args[5:]...)))
		unused := args[5].(int64)
		named := int64(0)
		if args[6] == "GRANT" {
			named = args[7].(int64)
		}
		if s.grant != 0 && (named == 0 || named == s.grant) {
			s.refunded += unused
			s.grant = 0
		}
		if len(s.returns) == 1 {
			cmd.SetErr(errors.New("i/o timeout")) // landed; its reply lost
		} else {
			cmd.SetVal([]any{})
		}
	default:
		if s.grant == 0 {
			s.next++
			s.grant, s.granted = s.next, s.granted+5
		}
		cmd.SetVal([]any{int64(5), int64(10000), int64(8000), s.grant})
	}
	return cmd
}

// A return whose reply is lost may have landed: what it gave back is not
// used here, and the next renewal sends it again naming its grant before
// it asks for another lease — so no unit is both refunded and admitted.
func TestLeaseReturnWithALostReplyIsNotSpentTwice(t *testing.T) {
	now := time.Unix(1e9, 0)
	l := oneDescriptorLeases(t, &now)
	s := &replyLost{}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	ctx := context.Background()
	admitted := 0
	check := func() {
		d, err := l.Check(ctx, s, req, "")
		if err != nil {
			t.Fatal(err)
		}
		if !d.Limited {
			admitted++
		}
		l.wg.Wait()
	}
	check() // per request; grant 1 (5 units) is asked for
	admitted = 0
	now = now.Add(time.Second)
	check()
	check()                        // 3 left
	now = now.Add(8 * time.Second) // past the refresh: its return's reply is lost
	check()                        // from the lease: 2 left, given back
	for range 4 {
		check() // nothing to decide from but what the lease left, given back
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.returns) < 2 || s.returns[0] != "2 GRANT 1 DESCRIPTOR k v" || s.returns[1] != s.returns[0] {
		t.Fatalf("returns sent: %q, want grant 1's return sent again", s.returns)
	}
	// Admitted from leases, never past what was granted less what was
	// refunded.
	if used := s.granted - s.refunded; int64(admitted) > used {
		t.Fatalf("admitted %d from leases of %d with %d refunded: a unit given back was spent", admitted, s.granted, s.refunded)
	}
}
