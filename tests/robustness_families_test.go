package tests

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/robust"
)

// The suite's traffic beyond single-key budgets and RL.CHECK/RESERVE:
// concurrency slots (CONC.*), leases of a bucket (RL.LEASE), and Envoy's
// ShouldRateLimit through each member's gRPC door. Each records its calls
// in the ledger (robust.Ledger); the concurrency slots also as holds,
// checked for more held at once than the limit (robust.AtOnce).

// Concurrency keys: robustConcKeys a generation, robustConcLimit slots each,
// leases that outlive a run (a day).
const (
	robustConcKeys  = 16
	robustConcLimit = 6
)

// robustConcKey is concurrency key k of generation gen, also its ledger key.
func robustConcKey(gen, k int) string {
	return "robust:conc:" + strconv.Itoa(gen) + ":" + strconv.Itoa(k)
}

// Lease buckets: robustLeaseCounters a generation, of the rules' per-lease
// limit (robustLeaseCap, no refill within a run).
const (
	robustLeaseCounters = 16
	robustLeaseCap      = 30
)

func robustLeaseCounter(gen, k int) robustCounter {
	return robustCounter{"lease", "l" + strconv.Itoa(gen) + "." + strconv.Itoa(k), robustLeaseCap}
}

// robustConc acquires a slot of a concurrency key and releases it at once
// or keeps it (until the key's generation is over, the slot stays held):
// the ledger counts a slot kept as admitted, one released (the release
// answered) as returned; the holds are checked for more at once than the
// limit.
func robustConc(r *robustRoute, id, n int, rng *rand.Rand, rec *robustRecorder) {
	gen := int(time.Since(rec.start) / robustGeneration)
	key := robustConcKey(gen, rng.IntN(rec.n(robustConcKeys)))
	rid := fmt.Sprintf("w%d-%d-%d", id, n, rng.Uint32())
	call := robust.Call{Keys: []string{key}, Units: 1, Call: rec.now()}
	to := r.client(key)
	v, err := to.Do(context.Background(), "CONC.ACQUIRE", key, robustConcLimit, 86400, rid).Int64Slice()
	call.Return = rec.now()
	call.What = fmt.Sprintf("CONC.ACQUIRE %s by worker %d at %s: %s", rid, id, to.Options().Addr, answer(v, err))
	switch {
	case err != nil:
		call.Outcome = r.failed(key, err, rec)
	case len(v) == 5 && v[0] == 0:
		call.Outcome = robust.Admitted
	case len(v) == 5 && v[0] == 1:
		call.Outcome = robust.Refused
	default:
		call.Outcome = robust.Unknown
	}
	hold := robust.Hold{Key: key, From: call.Return, Until: -1, What: call.What}
	if call.Outcome != robust.Admitted || rng.IntN(5) < 2 {
		if call.Outcome == robust.Admitted {
			rec.hold(hold) // kept to the run's end
		}
		rec.call(call)
		return
	}
	// Released, sent again while nothing was applied or the outcome is
	// unknown: a release of a slot already released answers 0.
	hold.Until = rec.now()
	unknown := false
	for range 20 {
		to := r.client(key)
		released, err := to.Do(context.Background(), "CONC.RELEASE", key, rid).Int64()
		call.Return = rec.now()
		call.What += fmt.Sprintf("; CONC.RELEASE at %s: %s", to.Options().Addr, answer(released, err))
		if err != nil {
			if r.failed(key, err, rec) == robust.Unknown {
				unknown = true
			}
			continue
		}
		if released == 0 && !unknown {
			rec.anomaly("%s: admitted, then unknown to its release", call.What)
		}
		call.Outcome = robust.Returned
		rec.hold(hold)
		rec.call(call)
		return
	}
	if unknown {
		// A release may have freed it: certainly held only until the
		// first was sent.
		call.Outcome = robust.Unknown
	} else {
		hold.Until = -1 // no release applied: held to the end
	}
	rec.hold(hold)
	rec.call(call)
}

// robustLease leases up to 4 units of a bucket to a holder of its own and
// gives a random part of the grant back (RL.LEASE RETURN): the ledger
// counts what was kept as admitted, what the answered return gave back as
// returned. A lease of 0 charged nothing; one whose answer was lost may
// have charged up to what it asked.
func robustLease(r *robustRoute, id, n int, rng *rand.Rand, rec *robustRecorder) {
	gen := int(time.Since(rec.start) / robustGeneration)
	c := robustLeaseCounter(gen, rng.IntN(rec.n(robustLeaseCounters)))
	holder := fmt.Sprintf("w%d-%d-%d", id, n, rng.Uint32())
	want := int64(1 + rng.IntN(4))
	route := "lease:" + c.value
	call := robust.Call{Keys: []string{c.String()}, Units: want, Call: rec.now()}
	to := r.client(route)
	v, err := to.Do(context.Background(), "RL.LEASE", "robust", holder, 3600, "WANT", want, "DESCRIPTOR", c.key, c.value).Int64Slice()
	call.Return = rec.now()
	call.What = fmt.Sprintf("RL.LEASE %s WANT %d by worker %d at %s: %s", holder, want, id, to.Options().Addr, answer(v, err))
	switch {
	case err != nil:
		call.Outcome = r.failed(route, err, rec)
	case len(v) == 3 && v[0] == 0:
		call.Outcome = robust.NotApplied
	case len(v) == 3 && v[0] > 0 && v[0] <= want:
		call.Outcome, call.Units = robust.Admitted, v[0]
	default:
		rec.anomaly("%s: not a grant of at most %d", call.What, want)
		call.Outcome = robust.Unknown
	}
	if call.Outcome != robust.Admitted {
		rec.call(call)
		return
	}
	granted := call.Units
	unused := rng.Int64N(granted + 1)
	unknown := false
	for range 20 {
		to := r.client(route)
		rows, err := to.Do(context.Background(), "RL.LEASE", "RETURN", "robust", holder, "UNUSED", unused, "DESCRIPTOR", c.key, c.value).Slice()
		call.Return = rec.now()
		call.What += fmt.Sprintf("; RETURN UNUSED %d at %s: %s", unused, to.Options().Addr, answer(rows, err))
		if err != nil && err != redis.Nil {
			if r.failed(route, err, rec) == robust.Unknown {
				unknown = true
			}
			continue
		}
		if err == redis.Nil && !unknown {
			rec.anomaly("%s: granted, then unknown to its return", call.What)
		}
		rec.leaseSplit(call, granted-unused, unused, robust.Returned)
		return
	}
	// Never answered: what it would give back may or may not have been.
	out := robust.Admitted
	if unknown {
		out = robust.Unknown
	}
	rec.leaseSplit(call, granted-unused, unused, out)
}

// leaseSplit records a lease as what it kept (admitted) and what its
// return gave back (as out says).
func (r *robustRecorder) leaseSplit(c robust.Call, kept, back int64, out robust.Outcome) {
	if kept > 0 {
		k := c
		k.Units, k.Outcome = kept, robust.Admitted
		r.call(k)
	}
	if back > 0 {
		b := c
		b.Units, b.Outcome = back, out
		r.call(b)
	}
}

// robustGRPC is a worker's gRPC clients, one per member's door.
type robustGRPC struct {
	conns map[string]*grpc.ClientConn
}

func (g *robustGRPC) client(addr string) pb.RateLimitServiceClient {
	c := g.conns[addr]
	if c == nil {
		var err error
		if c, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			panic(err) // an address the suite made up wrong
		}
		g.conns[addr] = c
	}
	return pb.NewRateLimitServiceClient(c)
}

func (g *robustGRPC) close() {
	for _, c := range g.conns {
		c.Close()
	}
}

// robustShouldRateLimit is Envoy's call for a tenant's and a user's counter
// (the same counters as RL.CHECK's), at a member's gRPC door: any member
// decides (a follower forwards; a sharded cluster's door checks across
// groups).
func robustShouldRateLimit(r *robustRoute, g *robustGRPC, id int, rng *rand.Rand, rec *robustRecorder) {
	cs := robustPair(rng, rec)
	node := r.nodes[r.next]
	addr := grpcAddrOf(node)
	call := robust.Call{Keys: robustKeysOf(cs), Units: 1, Call: rec.now()}
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	resp, err := g.client(addr).ShouldRateLimit(cctx, rlsRequest("robust", 1, cs[0].key+"="+cs[0].value, cs[1].key+"="+cs[1].value))
	cancel()
	call.Return = rec.now()
	call.What = fmt.Sprintf("ShouldRateLimit by worker %d at %s: ", id, addr)
	if err != nil {
		call.What += err.Error()
		call.Outcome = grpcOutcome(err, rec)
		if call.Outcome != robust.Admitted {
			r.next = (r.next + 1) % len(r.nodes)
			time.Sleep(20 * time.Millisecond)
		}
		rec.call(call)
		return
	}
	call.What += resp.GetOverallCode().String()
	matched := len(resp.Statuses) == 2 && resp.Statuses[0].CurrentLimit != nil && resp.Statuses[1].CurrentLimit != nil
	switch {
	case !matched:
		call.Outcome = robust.Unknown // no rule matched: not an answer of these rules
	case resp.OverallCode == pb.RateLimitResponse_OK:
		call.Outcome = robust.Admitted
	case resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT:
		call.Outcome = robust.Refused
	default:
		call.Outcome = robust.Unknown
	}
	rec.call(call)
}

// grpcOutcome classifies a ShouldRateLimit error: the door's own
// UNAVAILABLE and RESOURCE_EXHAUSTED say nothing was applied, as does a
// connection that was never made; a call cut off in flight, UNKNOWN or a
// deadline may have charged.
func grpcOutcome(err error, rec *robustRecorder) robust.Outcome {
	st, _ := status.FromError(err)
	msg := st.Message()
	switch {
	case (st.Code() == codes.Unavailable || st.Code() == codes.ResourceExhausted) && strings.HasPrefix(msg, "sluice: "):
		return robust.NotApplied
	case st.Code() == codes.Unavailable && strings.Contains(msg, "connection refused"):
		return robust.NotApplied
	case st.Code() == codes.Unknown && strings.Contains(msg, "the outcome is unknown"),
		st.Code() == codes.DeadlineExceeded, st.Code() == codes.Unavailable:
		return robust.Unknown
	}
	key := "grpc " + st.Code().String() + ": " + firstWords(msg)
	n, _ := rec.unexpected.LoadOrStore(key, 0)
	rec.unexpected.Store(key, n.(int)+1)
	return robust.Unknown
}

// grpcAddrOf is the gRPC door a member was started with.
func grpcAddrOf(s *Server) string {
	for i, a := range s.Args {
		if a == "--grpc-addr" && i+1 < len(s.Args) {
			return s.Args[i+1]
		}
	}
	panic("a member without --grpc-addr: " + s.Addr)
}

// robustPreviousRelease is the commit of the release before this one
// (0.4.0: the CHANGELOG's entry was written there; the repository has no
// tags), the rolling-upgrade scenario's starting point.
// SLUICE_ROBUSTNESS_PREVIOUS names another commit or tag.
const robustPreviousRelease = "904b39f"

// previousRelease builds sluice as it was at the previous release, from
// the repository's history (git archive), and is its binary.
func previousRelease(t *testing.T, asked bool) string {
	rev := cmp.Or(os.Getenv("SLUICE_ROBUSTNESS_PREVIOUS"), robustPreviousRelease)
	if err := exec.Command("git", "-C", "..", "cat-file", "-e", rev+"^{commit}").Run(); err != nil && !asked {
		// A checkout without the history (a shallow clone): the scenario
		// runs where it is, or when named.
		t.Skipf("the previous release's commit %s is not in this checkout (a shallow clone?): the rolling upgrade needs the repository's history", rev)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	bin := filepath.Join(dir, "sluice-"+rev)
	for _, step := range [][]string{
		{"git", "-C", "..", "archive", "-o", filepath.Join(dir, "src.tar"), rev},
		{"mkdir", src},
		{"tar", "-xf", filepath.Join(dir, "src.tar"), "-C", src},
		{"go", "build", "-C", src, "-o", bin, "./cmd/sluice"},
	} {
		if out, err := exec.Command(step[0], step[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("building the previous release (%s) for the rolling upgrade needs the repository's history: %s: %v\n%s",
				rev, strings.Join(step, " "), err, out)
		}
	}
	return bin
}

// levelRaised waits for every member to say its group's log is at the
// apply level this build supports (INFO cluster), and records an anomaly
// if one does not within a minute.
func (rc *robustCluster) levelRaised(t *testing.T, rec *robustRecorder) {
	var at []string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		at = at[:0]
		for _, s := range rc.nodes {
			c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, MaxRetries: -1})
			info, err := c.Info(context.Background(), "cluster").Result()
			c.Close()
			level, supported := infoLine(info, "sluice_apply_level"), infoLine(info, "sluice_apply_level_supported")
			if err != nil || level == "" || level != supported {
				at = append(at, fmt.Sprintf("%s at %q of %q (%v)", s.Addr, level, supported, err))
			}
		}
		if len(at) == 0 {
			return
		}
	}
	rec.anomaly("the log's apply level was not raised once every member was upgraded: %s", strings.Join(at, "; "))
}

// infoLine is field's value in an INFO reply ("" when absent).
func infoLine(info, field string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// robustUpgrade upgrades the members one by one, evenly through the run:
// each stopped gracefully and started again as this build, under the
// traffic, while no other fault is under way.
func robustUpgrade(ctx context.Context, rc *robustCluster, rec *robustRecorder, duration time.Duration) {
	for i, s := range rc.nodes {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(rec.start.Add(duration * time.Duration(i+1) / time.Duration(len(rc.nodes)+1)))):
		}
		func() {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			rec.note("upgrade: %s to this build", s.Addr)
			robustStop(s, rec)
			s.bin = ""
			robustStart(s, rec)
			rec.note("healed %s", s.Addr)
		}()
	}
}
