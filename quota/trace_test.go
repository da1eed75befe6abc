package quota

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limiter"
)

// traceModel is the obvious quota: a map from period start (found with
// refBounds) to units used, so roll-over is implicit.
type traceModel struct {
	loc    *time.Location
	period Period
	anchor int64
	used   map[int64]int64
}

func (m *traceModel) bounds(now int64) (int64, int64) {
	return refBounds(m.loc, m.period, m.anchor, now)
}

// TestCheckMatchesModel runs seeded random traces of CHECK, GET, REFUND and
// RESET (with limit changes) against the model, passing the state through
// its snapshot encoding at every step.
func TestCheckMatchesModel(t *testing.T) {
	traces := 120
	if testing.Short() {
		traces = 20
	}
	nominal := map[Period]int64{Hour: nsPerHour, Day: nsPerDay, Week: nsPerWeek, Month: 30 * nsPerDay, Year: 365 * nsPerDay}
	for seed := range uint64(traces) {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		zone := referenceZones[r.IntN(len(referenceZones))]
		loc, _ := LoadZone(zone)
		p := Period(1 + r.IntN(5))
		now := randomNear(r, loc)
		anchor := randomAnchor(r, loc, now)
		sch := mustSchedule(t, p, anchor, zone)
		m := traceModel{loc: loc, period: p, anchor: anchor, used: map[int64]int64{}}
		limit := int64(r.IntN(20))
		var st State
		exists := false
		for i := range 300 {
			switch r.IntN(10) {
			case 0, 1, 2, 3:
				now += r.Int64N(nominal[p] / 20)
			case 4:
				now += r.Int64N(2 * nominal[p])
			case 5:
				now += r.Int64N(1000) // nanoseconds, to hit boundaries closely
			}
			start, end := m.bounds(now)
			if st.End > now && st.End-1000 <= now && r.IntN(2) == 0 {
				now = st.End // land exactly on the stored boundary
				start, end = m.bounds(now)
			}
			where := func() string { return zone + " " + p.String() + " at " + fmtNs(now) }
			op := r.IntN(20)
			if !exists || op < 14 {
				if r.IntN(20) == 0 {
					limit = int64(r.IntN(20))
				}
				cost := int64(r.IntN(int(limit) + 3))
				next, store, res, err := Check(st, exists, now, limit, sch, cost)
				if err != nil {
					t.Fatalf("seed %d step %d %s: %v", seed, i, where(), err)
				}
				want := limiter.Result{Limit: limit, RetryAfter: limiter.Never, ResetAfter: end - now}
				used := m.used[start]
				switch {
				case cost > limit:
					want.Limited = true
				case used+cost > limit:
					want.Limited = true
					want.RetryAfter = end - now
				default:
					used += cost
				}
				want.Remaining = max(limit-used, 0)
				if res != want || next.Start != start || next.End != end {
					t.Fatalf("seed %d step %d %s cost %d limit %d: got %+v [%s, %s), model %+v [%s, %s)", seed, i, where(),
						cost, limit, res, fmtNs(next.Start), fmtNs(next.End), want, fmtNs(start), fmtNs(end))
				}
				if store {
					m.used[start] = used
					st, exists = next, true
				} else if cost > 0 && !want.Limited {
					t.Fatalf("seed %d step %d: admitted but not stored", seed, i)
				}
			} else {
				var u Usage
				var err error
				switch {
				case op < 17:
					u, err = st.Get(now)
				case op < 19:
					n := int64(r.IntN(5))
					u, err = st.Refund(now, n)
					m.used[start] = max(m.used[start]-n, 0)
				default:
					u, err = st.Reset(now)
					m.used[start] = 0
				}
				if err != nil || u.Used != m.used[start] || u.Start != start || u.End != end {
					t.Fatalf("seed %d step %d op %d %s: got %+v %v, model used %d [%s, %s)", seed, i, op, where(),
						u, err, m.used[start], fmtNs(start), fmtNs(end))
				}
			}
			if exists {
				dec, err := DecodeState(st.AppendBinary(nil))
				if err != nil || !sameState(dec, st) {
					t.Fatalf("seed %d step %d: snapshot round trip %+v → %+v, %v", seed, i, st, dec, err)
				}
				st = dec
			}
		}
	}
}

func sameState(a, b State) bool {
	return a.Schedule.Equal(b.Schedule) && a.Limit == b.Limit && a.Used == b.Used && a.Start == b.Start && a.End == b.End
}
