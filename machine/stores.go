package machine

import (
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/resp"
)

// Stores reports whether applying args (cmd's, the command's name first)
// at now could add a record — a new key, a reservation — or grow one that
// exists (an exact sliding log's entries, a CONC key's leases, a lease
// holder's), rather than change records in place. Over maxmemory the
// server refuses a command that would store more and keeps serving the
// rest, so a limiter keeps limiting the keys it knows with the state they
// have (Redis' denyoom, with sluice's noeviction: nothing is ever
// evicted). It reads the keyspace under each slot's lock
// and changes nothing; a command it cannot see into counts as storing.
// Call it only for a well-formed command (Command.Check passed).
func (m *Machine) Stores(cmd *Command, args [][]byte, now int64) bool {
	switch cmd.Name {
	case "rl.check", "rl.shouldratelimit":
		return m.storesCounters(args, now)
	case "rl.reserve", "rl.part", "rl.override", "sluice.import":
		return true // a reservation, a part's reservation, an override, moved records
	case "exec":
		return false // its commands were checked as they were queued
	case "conc.acquire":
		return true // a lease more in the key's table
	case "rl.lease":
		// A holder's lease, and the bucket's demand: a return frees.
		return len(args) < 2 || !resp.EqualFold(args[1], "return")
	case "sw.check":
		// An exact log grows by each request it admits.
		for _, a := range args[4:] {
			if resp.EqualFold(a, "exact") {
				return true
			}
		}
	}
	keys := cmd.Keys(args)
	if len(keys) == 0 {
		return true
	}
	for _, k := range keys {
		if !m.exists(args[k], now) {
			return true
		}
	}
	return false
}

// exists reports whether key holds a live record at now.
func (m *Machine) exists(key []byte, now int64) bool {
	r := m.keys.View().ReadKey(key)
	defer r.Unlock()
	_, ok := r.Get(key, now)
	return ok
}

// storesCounters reports whether an RL.CHECK or RL.SHOULDRATELIMIT would
// create a counter: one of the limits it matches has none yet.
func (m *Machine) storesCounters(args [][]byte, now int64) bool {
	p := m.plan()
	defer m.release(p)
	domain := view(args[1])
	if resp.EqualFold(args[0], "rl.shouldratelimit") {
		if parseShouldRateLimit(m, args, p) != "" {
			return true
		}
		m.planShouldRateLimit(p, domain, false)
	} else {
		if parseDescriptors(args[2:], p) != "" {
			return true
		}
		d := m.rules().Domain(domain)
		if d == nil {
			return false // nothing is limited, nothing stored
		}
		p.forDomain(domain, false)
		p.addMatched(d)
	}
	for _, sp := range p.spans {
		if !m.exists(p.span(sp.counter), now) {
			return true
		}
	}
	for i := range p.checks {
		if p.checks[i].kind == keyspace.KindSlidingLog {
			return true // an exact log grows by each request it admits
		}
	}
	return false
}
