package machine

import (
	"strconv"
	"sync"
	"testing"

	"github.com/sluice-rl/sluice/resp"
)

const spreadRules = `domain: spread
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: minute, requests_per_unit: 40}
  - key: endpoint
    rate_limit: {name: per-endpoint, unit: minute, requests_per_unit: 30}
`

// RL.CHECKs whose counters sit in different slots, from many goroutines
// at once in both descriptor orders: no deadlock (slots are taken in slot
// order), and all or nothing — every admitted check charged both its
// counters, so no counter passes its limit and each counter's count is
// exactly the admissions that named it. The endpoints (2 × 30) run out
// before the users (3 × 40), so a check the endpoint refuses must leave
// its user's counter alone: charging one counter of a refused check shows
// in the user counters read back.
func TestSpreadChecksAreAtomic(t *testing.T) {
	m := New(Options{})
	if r := do(m, t0, "RL.RULES", "LOAD", "spread.yaml", spreadRules); r != "+OK\r\n" {
		t.Fatal(r)
	}
	var mu sync.Mutex
	perUser, perEndpoint := map[string]int{}, map[string]int{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var w resp.Writer
			for i := range 300 {
				user, ep := "u"+strconv.Itoa((g+i)%3), "e"+strconv.Itoa(i%2)
				args := []string{"RL.CHECK", "spread", "DESCRIPTOR", "user", user, "DESCRIPTOR", "endpoint", ep}
				if g%2 == 1 {
					args = []string{"RL.CHECK", "spread", "DESCRIPTOR", "endpoint", ep, "DESCRIPTOR", "user", user}
				}
				b := make([][]byte, len(args))
				for j, a := range args {
					b[j] = []byte(a)
				}
				w.Buf = w.Buf[:0]
				m.ApplyArgs(t0, b, &w)
				if string(w.Buf[:8]) == "*7\r\n:0\r\n" {
					mu.Lock()
					perUser[user]++
					perEndpoint[ep]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for u, n := range perUser {
		if n > 40 {
			t.Errorf("user %s admitted %d times, limit 40", u, n)
		}
		total += n
	}
	for e, n := range perEndpoint {
		if n != 30 {
			t.Errorf("endpoint %s admitted %d times, want its limit, 30", e, n)
		}
		r := do(m, t0, "RL.CHECK", "spread", "COST", "0", "DESCRIPTOR", "endpoint", e)
		if !containsAt(r, 3, ":0\r\n") {
			t.Errorf("endpoint %s: %q, want remaining 0", e, r)
		}
	}
	if total != 60 {
		t.Fatalf("%d admitted in all, want 60 (two endpoints of 30)", total)
	}
	// The counters hold exactly what was admitted.
	for u, n := range perUser {
		r := do(m, t0, "RL.CHECK", "spread", "COST", "0", "DESCRIPTOR", "user", u)
		if want := ":" + strconv.Itoa(40-n) + "\r\n"; !containsAt(r, 3, want) {
			t.Errorf("user %s: %q, want remaining %d", u, r, 40-n)
		}
	}
}

// containsAt reports whether the i-th line-element of a RESP array reply is
// want (elements start after the header line).
func containsAt(reply string, i int, want string) bool {
	lines := 0
	for start := 0; start < len(reply); {
		end := start
		for end < len(reply) && reply[end] != '\n' {
			end++
		}
		if lines == i {
			return reply[start:end+1] == want
		}
		lines++
		start = end + 1
	}
	return false
}
