package machine

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/window"
)

const exactRules = `domain: logs
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: minute, requests_per_unit: 60, sluice: {algorithm: sliding-exact}}
  - key: ip
    rate_limit: {name: per-ip, unit: second, requests_per_unit: 3, sluice: {algorithm: sliding-exact}}
`

// logReference answers SW.CHECK … EXACT from one window.LogState per key
// (DecodeLog of nothing is the empty log), as the machine kept every log
// before logs moved into records.
type logReference map[string]refLog

type refLog struct {
	st       window.LogState
	expireAt int64
}

// at is key's log as a check at now sees it: absent once expired, as the
// keyspace drops it.
func (r logReference) at(key string, now int64) (window.LogState, bool) {
	l, ok := r[key]
	if ok && l.expireAt <= now {
		delete(r, key)
		return window.LogState{}, false
	}
	return l.st, ok
}

// Sliding logs on random traces answer what logs kept as objects answer,
// through SW.CHECK … EXACT and through RL.CHECK with two exact-log rules
// (one request charging two keys at once), while keys cross from their
// record to an object; every key encodes as the reference's.
func TestLogRecordsAgainstObjects(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	m := New(Options{})
	if r := do(m, t0, "RL.RULES", "LOAD", "logs.yaml", exactRules); r != "+OK\r\n" {
		t.Fatalf("RL.RULES LOAD: %q", r)
	}
	ref := logReference{}
	now := t0
	inline, objects := 0, 0
	check := func(step int, key string) {
		s := m.keys.LockKey([]byte(key))
		defer s.Unlock()
		e, found, _ := s.GetKind([]byte(key), keyspace.KindSlidingLog, now)
		want, exists := ref.at(key, now)
		if found != exists {
			t.Fatalf("step %d: %s in the keyspace %v, in the reference %v", step, key, found, exists)
		}
		if !found {
			return
		}
		if e.Inline() {
			inline++
		} else {
			objects++
		}
		got, err := AppendState(nil, s, e)
		if err != nil || string(got) != string(want.AppendBinary(nil)) {
			t.Fatalf("step %d: %s encodes as %x (%v), want %x", step, key, got, err, want.AppendBinary(nil))
		}
	}
	var sc Scratch
	var w resp.Writer
	for step := range 30000 {
		now += rng.Int64N(300e6)
		if rng.IntN(3) == 0 {
			// SW.CHECK EXACT on a key of its own, limits small and large.
			key := "sw" + strconv.Itoa(rng.IntN(3))
			limit := []int64{5, 40, 400}[rng.IntN(3)]
			cost := int64(1 + rng.IntN(3))
			p, _ := window.NewParams(limit, 10)
			old, exists := ref.at(key, now)
			next, store, expireAt, res, err := old.Check(exists, now, p, cost)
			if err != nil {
				t.Fatal(err)
			}
			if store {
				ref[key] = refLog{next.Clone(), expireAt}
			}
			w.Buf = w.Buf[:0]
			want := resp.Writer{}
			want.Limiter(res.Reply())
			args := [][]byte{[]byte("SW.CHECK"), []byte(key), []byte(strconv.FormatInt(limit, 10)), []byte("10"), []byte("COST"), []byte(strconv.FormatInt(cost, 10)), []byte("EXACT")}
			m.ApplyScratch(&sc, now, m.Lookup([]byte("sw.check")), args, &w)
			if string(w.Buf) != string(want.Buf) {
				t.Fatalf("step %d SW.CHECK %s %d: %q, want %q", step, key, limit, w.Buf, want.Buf)
			}
			check(step, key)
			continue
		}
		// RL.CHECK with both rules: all or nothing over two logs.
		user, ip := strconv.Itoa(rng.IntN(2)), strconv.Itoa(rng.IntN(2))
		userKey, ipKey := counterKey(m, "logs", "user", user), counterKey(m, "logs", "ip", ip)
		pUser, _ := window.NewParams(60, 60)
		pIP, _ := window.NewParams(3, 1)
		oldU, existsU := ref.at(userKey, now)
		oldI, existsI := ref.at(ipKey, now)
		nextU, storeU, expU, resU, errU := oldU.Check(existsU, now, pUser, 1)
		nextI, storeI, expI, resI, errI := oldI.Check(existsI, now, pIP, 1)
		if errU != nil || errI != nil {
			t.Fatal(errU, errI)
		}
		limited := resU.Limited || resI.Limited
		if !limited {
			if storeU {
				ref[userKey] = refLog{nextU.Clone(), expU}
			}
			if storeI {
				ref[ipKey] = refLog{nextI.Clone(), expI}
			}
		}
		r := do(m, now, "RL.CHECK", "logs", "DESCRIPTOR", "user", user, "DESCRIPTOR", "ip", ip)
		wantFlag := ":0\r\n"
		if limited {
			wantFlag = ":1\r\n"
		}
		if len(r) < 8 || r[4:8] != wantFlag {
			t.Fatalf("step %d RL.CHECK user %s ip %s: %q, want limited %v", step, user, ip, r, limited)
		}
		check(step, userKey)
		check(step, ipKey)
	}
	if inline == 0 || objects == 0 {
		t.Fatalf("logs seen in their record %d times, as objects %d: the trace missed one form", inline, objects)
	}
	t.Logf("logs in their record %d times, objects %d times", inline, objects)
}

// counterKey is the counter key of the rule domain's descriptor k=v matches.
func counterKey(m *Machine, domain, k, v string) string {
	entries := []policy.Entry{{Key: k, Value: v}}
	return string(m.Rules().Set.Domain(domain).Match(entries).AppendKey(nil, entries))
}

// RL.CHECK over two sliding logs that live in their records, each holding
// several admissions, allocates nothing: each check decodes into scratch
// arrays the apply keeps.
func TestRLCheckOfLogsAllocatesNothing(t *testing.T) {
	m := New(Options{})
	if r := do(m, t0, "RL.RULES", "LOAD", "logs.yaml", exactRules); r != "+OK\r\n" {
		t.Fatalf("RL.RULES LOAD: %q", r)
	}
	cmd := m.Lookup([]byte("rl.check"))
	args := [][]byte{[]byte("RL.CHECK"), []byte("logs"), []byte("DESCRIPTOR"), []byte("user"), []byte("a"),
		[]byte("DESCRIPTOR"), []byte("ip"), []byte("b")}
	var w resp.Writer
	var sc Scratch
	now := t0
	for range 5 {
		now += 1e9 / 4 // three a second fit the ip rule
		m.ApplyScratch(&sc, now, cmd, args, &w)
	}
	for _, key := range []string{counterKey(m, "logs", "user", "a"), counterKey(m, "logs", "ip", "b")} {
		s := m.keys.LockKey([]byte(key))
		e, found, _ := s.GetKind([]byte(key), keyspace.KindSlidingLog, now)
		s.Unlock()
		if !found || !e.Inline() {
			t.Fatalf("%s: found %v, in its record %v", key, found, found && e.Inline())
		}
	}
	if raceEnabled {
		t.Skip("RL.CHECK's scratch comes from a sync.Pool, which drops items at random under the race detector")
	}
	if a := testing.AllocsPerRun(200, func() {
		now += 1e9 / 4
		w.Buf = w.Buf[:0]
		m.ApplyScratch(&sc, now, cmd, args, &w)
	}); a != 0 {
		t.Errorf("RL.CHECK over two logs: %.1f allocations", a)
	}
}

// SW.CHECK … EXACT on a log in its record allocates nothing either.
func TestSlidingLogCheckAllocatesNothing(t *testing.T) {
	m := New(Options{})
	cmd := m.Lookup([]byte("sw.check"))
	args := [][]byte{[]byte("SW.CHECK"), []byte("k"), []byte("40"), []byte("10"), []byte("EXACT")}
	var w resp.Writer
	var sc Scratch
	now := t0
	for range 5 {
		now += 1e9
		m.ApplyScratch(&sc, now, cmd, args, &w)
	}
	if a := testing.AllocsPerRun(200, func() {
		now += 1e9
		w.Buf = w.Buf[:0]
		m.ApplyScratch(&sc, now, cmd, args, &w)
	}); a != 0 {
		t.Errorf("SW.CHECK EXACT: %.1f allocations", a)
	}
}
