package machine

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/slot"
)

// keyVariants are keys a client may send: plain, holding braces (a hash
// tag, an empty tag, an unclosed one), empty, binary.
var keyVariants = []string{"plain", "a{b}c", "{}x", "x}{y", "", "\x00\xff{\r\n}"}

// TestKeysDeclaredOnce runs every keyed machine command with each key
// variant, alone and inside a transaction, and checks that the slots its
// declaration reports (Command.Keys: COMMAND GETKEYS, routing), the slots
// a transaction locks for it (Command.Slots) and the slots it writes agree:
// the reported and the written slots are among the locked ones, and a
// command that declares no slots of its own writes only its keys' slots.
func TestKeysDeclaredOnce(t *testing.T) {
	for _, c := range New(Options{}).Commands() {
		if c.Internal() || c.Name == "exec" {
			continue
		}
		ex := examples[c.Name]
		if len(c.Keys(words(ex...))) == 0 && c.slots == nil {
			continue // keyless
		}
		for _, v := range append(keyVariants, distinctKeys) {
			args := withKey(c, ex, v)
			for _, inTx := range []bool{false, true} {
				m := New(Options{})
				rules := "domain: " + strconv.Quote(v) + "\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n  - key: endpoint\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"
				if got := do(m, t0, "RL.RULES", "LOAD", "d.yaml", rules); got != "+OK\r\n" && c.Name == "rl.check" && !inTx {
					t.Logf("no rules for the domain %q: %q", v, got)
				}
				b := words(args...)
				if c.Name == "rl.settle" || c.Name == "rl.cancel" {
					if got := do(m, t0, "RL.RESERVE", v, "r1", "30", "COST", "2", "DESCRIPTOR", "user", "u1"); !strings.HasPrefix(got, "*7") {
						t.Fatalf("%s %q: setup: %q", c.Name, v, got)
					}
				}
				if c.Name == "rl.check" || c.Name == "rl.shouldratelimit" {
					// With an override and a scale, so the check reads the
					// domain's records too.
					do(m, t0, "RL.OVERRIDE", "SET", v, "5", "minute", "DESCRIPTOR", "user", "u1")
					do(m, t0, "RL.SCALE", "SET", v, "0.5")
				}
				reported := map[int]bool{}
				for _, i := range c.Keys(b) {
					reported[slot.Of(b[i])] = true
				}
				locked, all := c.Slots(nil, b)
				before := slotContents(m)
				var reply string
				if inTx {
					tx := []string{"EXEC", "0", strconv.Itoa(len(args))}
					reply = do(m, t0+1, append(tx, args...)...)
				} else {
					reply = do(m, t0+1, args...)
				}
				name := c.Name + " " + strconv.Quote(v)
				if inTx {
					name += " in EXEC"
				}
				if strings.Contains(reply, "internal error") {
					t.Errorf("%s: %q", name, reply)
					continue
				}
				if !all {
					for s := range reported {
						if !slices.Contains(locked, s) {
							t.Errorf("%s: reports slot %d, locks %v", name, s, locked)
						}
					}
				}
				after := slotContents(m)
				for s := range slot.Count {
					if before[s] == after[s] {
						continue
					}
					switch {
					case all:
					case !slices.Contains(locked, s):
						t.Errorf("%s: writes slot %d, locks %v (reply %q)", name, s, locked, reply)
					case c.slots == nil && !reported[s]:
						t.Errorf("%s: writes slot %d, reports %v", name, s, reported)
					}
				}
			}
		}
	}
}

// distinctKeys, as withKey's key, gives every key position a key of its
// own slot (k0, k1, … are in different slots), so a declaration that
// reports or locks only some of a command's keys shows.
const distinctKeys = "\x01distinct"

// withKey is the example call of c with every key replaced by key (all
// of RL.CHECKALL's limits on it, with one algorithm), or by keys of
// distinct slots (distinctKeys).
func withKey(c *Command, ex []string, key string) []string {
	keyAt := func(n int) string {
		if key == distinctKeys {
			return "k" + strconv.Itoa(n)
		}
		return key
	}
	if c.Name == "rl.checkall" {
		return []string{"RL.CHECKALL", "LIMIT", keyAt(0), "GCRA", "1", "2", "3", "LIMIT", keyAt(1), "GCRA", "4", "5", "6"}
	}
	args := slices.Clone(ex)
	for n, i := range c.Keys(words(ex...)) {
		args[i] = keyAt(n)
	}
	return args
}

// slotContents is every slot's records, as one string per slot.
func slotContents(m *Machine) []string {
	out := make([]string, slot.Count)
	now := m.Applied()
	for i := range slot.Count {
		s := m.keys.Lock(i)
		var b []byte
		s.Keys(now, func(key []byte, e keyspace.Entry) bool {
			b = append(b, key...)
			b = append(b, 0, byte(e.Kind()))
			b = append(b, strconv.FormatInt(s.Word(e), 10)...)
			b, _ = AppendState(b, s, e)
			return true
		})
		s.Unlock()
		out[i] = string(b)
	}
	return out
}
