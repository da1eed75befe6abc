package robust

import (
	"fmt"
	"sort"
	"time"
)

// A Hold is a concurrency slot a caller certainly held (CONC.ACQUIRE
// admitted): from its acquire's answer (From) to its first release's
// invoke (Until; the run's end when no release was sent or none applied —
// one whose outcome is unknown may have freed it). Between the two no
// correct server can have let it go.
type Hold struct {
	Key         string
	From, Until int64
	What        string
}

// AtOnce checks that no key had more holds at once than its limit: over
// the intervals in which holds certainly overlap (half-open: a release
// invoked at the instant another acquire answered frees its slot first).
// A hold whose key has no limit is not checked.
func AtOnce(holds []Hold, limits map[string]int64) []Violation {
	type edge struct {
		at    int64
		delta int
		what  string
	}
	byKey := map[string][]edge{}
	for _, h := range holds {
		// A hold released as it was answered (Until == From) counts for
		// nothing: at one instant releases come first.
		byKey[h.Key] = append(byKey[h.Key], edge{h.From, 1, h.What}, edge{h.Until, -1, ""})
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []Violation
	for _, k := range keys {
		limit, ok := limits[k]
		if !ok {
			continue
		}
		edges := byKey[k]
		sort.Slice(edges, func(i, j int) bool {
			if edges[i].at != edges[j].at {
				return edges[i].at < edges[j].at
			}
			return edges[i].delta < edges[j].delta
		})
		n := 0
		for _, e := range edges {
			n += e.delta
			if int64(n) > limit {
				out = append(out, Violation{Key: k, What: fmt.Sprintf("%d held at once at %.3fs of a limit of %d (the last: %s)",
					n, time.Duration(e.at).Seconds(), limit, e.what)})
				break
			}
		}
	}
	return out
}
