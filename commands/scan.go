package commands

import (
	"strconv"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/slot"
)

// SCAN walks the keyspace slot by slot: the cursor is the next hash slot to
// visit, and each call returns whole slots until it has examined COUNT keys
// (or reached the last slot). Each slot is read in one pass under its lock,
// so the guarantee is stronger than Redis': a key that exists for the whole
// scan is returned exactly once, never twice; keys added or removed during
// the scan may or may not be. A slot holding more than COUNT keys is
// returned whole, so COUNT is a lower bound on the work per call, as in
// Redis.

func scanCommands() []*Command {
	return []*Command{
		{Spec: cmdspec.Spec{Name: "scan", Arity: -2, Flags: []string{"readonly"}, Group: "generic", Since: "2.8.0",
			Summary: "Iterates over the key names, one hash slot at a time.", Complexity: "O(1) for every call. O(N) for a complete iteration.",
			Tips: []string{"nondeterministic_output", "request_policy:special", "response_policy:special"},
			Args: []Arg{{Name: "cursor", Type: "integer"},
				{Name: "pattern", Type: "pattern", Token: "MATCH", Optional: true},
				{Name: "count", Type: "integer", Token: "COUNT", Optional: true},
				{Name: "type", Type: "string", Token: "TYPE", Optional: true}}}, Run: runScan},
		{Spec: cmdspec.Spec{Name: "keys", Arity: 2, Flags: []string{"readonly"}, Group: "generic", Since: "1.0.0",
			Summary: "Returns all key names that match a pattern.", Complexity: "O(N) with N being the number of keys.",
			Tips: []string{"request_policy:all_shards", "nondeterministic_output_order"},
			Args: []Arg{{Name: "pattern", Type: "pattern"}}}, Run: runKeys,
			// A walk of every slot: off the event loop, so the loop's other
			// clients are served meanwhile (3M keys took the loop 1.8 s).,
			Waits: true},
	}
}

// keyFilter is SCAN's MATCH and TYPE.
type keyFilter struct {
	pattern glob
	anyKey  bool
	typ     []byte // nil: any kind
}

func (f *keyFilter) keep(key []byte, e keyspace.Entry) bool {
	if machine.Internal(e.Kind()) {
		return false // sluice's own records are not keys
	}
	if f.typ != nil && !equalFold(f.typ, machine.KindName(e.Kind())) {
		return false
	}
	return f.anyKey || f.pattern.match(key)
}

// scanSlot appends the slot's keys that pass f and reports how many live
// keys it examined.
func (c *Ctx) scanSlot(i int, f *keyFilter, out [][]byte) ([][]byte, int) {
	s, now := c.Env.Machine.Keys().Read(i), c.readInstant()
	defer s.Unlock()
	if s.Len() == 0 {
		return out, 0
	}
	n := 0
	s.Keys(now, func(key []byte, e keyspace.Entry) bool {
		n++
		if f.keep(key, e) {
			out = append(out, append([]byte(nil), key...))
		}
		return true
	})
	return out, n
}

// runScan is SCAN cursor [MATCH pattern] [COUNT count] [TYPE type].
func runScan(c *Ctx, args [][]byte) {
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		c.W.Error("ERR invalid cursor")
		return
	}
	f := keyFilter{anyKey: true}
	count := int64(10)
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			c.W.Error(errSyntax)
			return
		}
		v := args[i+1]
		switch {
		case equalFold(args[i], "count"):
			n, ok := parseInt(v)
			if !ok {
				c.W.Error(errNotInteger)
				return
			}
			if n < 1 {
				c.W.Error(errSyntax)
				return
			}
			count = n
		case equalFold(args[i], "match"):
			var bad string
			if f.pattern, bad = compileGlob(v); bad != "" {
				c.W.Error(bad)
				return
			}
			f.anyKey = f.pattern.matchAll()
		case equalFold(args[i], "type"):
			// Redis 7.2 accepts an unknown type and matches nothing.
			f.typ = v
		default:
			c.W.Error(errSyntax)
			return
		}
	}
	var keys [][]byte
	next := uint64(0)
	if cursor < slot.Count {
		examined := int64(0)
		i := int(cursor)
		for ; i < slot.Count && examined < count; i++ {
			var n int
			keys, n = c.scanSlot(i, &f, keys)
			examined += int64(n)
		}
		if i < slot.Count {
			next = uint64(i)
		}
	}
	c.W.Array(2)
	c.W.BulkString(strconv.FormatUint(next, 10))
	c.W.Array(len(keys))
	for _, k := range keys {
		c.W.Bulk(k)
	}
}

// runKeys is KEYS pattern. A pattern without wildcards is one lookup in
// its key's slot; any other pattern reads every slot.
func runKeys(c *Ctx, args [][]byte) {
	pattern, bad := compileGlob(args[1])
	if bad != "" {
		c.W.Error(bad)
		return
	}
	f := keyFilter{pattern: pattern}
	f.anyKey = f.pattern.matchAll()
	var keys [][]byte
	if lit, ok := f.pattern.literal(); ok {
		s, now := c.Env.Machine.Keys().ReadKey(lit), c.readInstant()
		if e, found := s.Get(lit, now); found && !machine.Internal(e.Kind()) {
			keys = append(keys, lit)
		}
		s.Unlock()
	} else {
		// A reply past what a client may hold is refused, not built:
		// past the output limit or maxmemory-clients it would close the
		// connection anyway, after taking the memory.
		most := int64(c.Env.Options.OutputBufferLimit)
		if most <= 0 || most > c.Env.MaxMemoryClients() {
			most = c.Env.MaxMemoryClients()
		}
		var size int64
		for i := range slot.Count {
			n := len(keys)
			keys, _ = c.scanSlot(i, &f, keys)
			for _, k := range keys[n:] {
				size += int64(len(k)) + 16 // "$<len>\r\n<key>\r\n"
			}
			if size > most {
				c.W.Error("ERR KEYS would answer more than " + itoa(most) +
					" bytes (client-output-buffer-limit / maxmemory-clients); use SCAN to walk the keys in pieces")
				return
			}
		}
	}
	c.W.Array(len(keys))
	for _, k := range keys {
		c.W.Bulk(k)
	}
}
