package policy

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/slot"
)

const keyRules = `domain: "api{x}"
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: path
    value: "/a"
    rate_limit: {unit: second, requests_per_unit: 5}
`

// A counter key is rl:{<16 hex digits>} then the length-prefixed domain,
// entries and algorithm; the tag is the FNV-1a hash of the rest, so a
// domain's counters spread over the slots, whatever bytes the domain and
// values hold (braces included), and the overrides stay in the domain's
// own slot.
func TestCounterKeysSpreadOverSlots(t *testing.T) {
	d, err := Parse("keys.yaml", []byte(keyRules))
	if err != nil {
		t.Fatal(err)
	}
	slots := map[int]bool{}
	seen := map[string]bool{}
	for i := range 1000 {
		entries := []Entry{{Key: "user", Value: fmt.Sprintf("u{%d}", i)}}
		key := string(d.Match(entries).AppendKey(nil, entries))
		rest, ok := strings.CutPrefix(key, "rl:{")
		if !ok || len(rest) < 17 || rest[16] != '}' {
			t.Fatalf("key %q has no 16-digit hash tag", key)
		}
		if want := fmt.Sprintf("%016x", fnv64a(rest[17:])); rest[:16] != want {
			t.Fatalf("key %q: tag %s, want %s", key, rest[:16], want)
		}
		if want := fmt.Sprintf("6:api{x}/4:user=%d:u{%d}#fixed", len(entries[0].Value), i); rest[17:] != want {
			t.Fatalf("key %q: body %q, want %q", key, rest[17:], want)
		}
		if seen[key] {
			t.Fatalf("two descriptors share key %q", key)
		}
		seen[key] = true
		slots[slot.Of([]byte(key))] = true
		if again := string(d.Match(entries).AppendKey(nil, entries)); again != key {
			t.Fatalf("key %q, then %q", key, again)
		}
	}
	if len(slots) < 900 {
		t.Fatalf("1000 counters of one domain in %d slots", len(slots))
	}
	// Overrides of every descriptor share the domain's slot.
	a := AppendDescriptorKey(nil, "api{x}", []Entry{{Key: "user", Value: "1"}})
	b := AppendDescriptorKey(nil, "api{x}", []Entry{{Key: "path", Value: "/a"}})
	if slot.Of(a) != slot.Of(b) {
		t.Fatalf("override keys %q and %q in different slots", a, b)
	}
	// A reused buffer: no allocation.
	entries := []Entry{{Key: "path", Value: "/a"}}
	r := d.Match(entries)
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf = r.AppendKey(buf[:0], entries) }); n != 0 {
		t.Fatalf("AppendKey: %.0f allocations", n)
	}
}

// A domain's records are in the domain's own slot, whatever bytes it
// holds: the slot a cluster client routes RL.OVERRIDE <domain> by.
func TestDomainRecordsAreInTheDomainsSlot(t *testing.T) {
	entries := []Entry{{Key: "k", Value: "v"}}
	for _, d := range []string{"api", "", "a{b}c", "{}", "x}y{", "{a}", "a{}b{c}", "\x00\xff{\r\n", "{{b}}"} {
		want := slot.Of([]byte(d))
		for _, key := range [][]byte{AppendDescriptorKey(nil, d, nil), AppendDescriptorKey(nil, d, entries)} {
			if got := slot.Of(key); got != want {
				t.Errorf("domain %q: record %q in slot %d, the domain in %d", d, key, got, want)
			}
		}
	}
	// Two domains never share a record key.
	seen := map[string]string{}
	for _, d := range []string{"api", "", "a{b}c", "{}", "@@@@", "b", "5:a{b}c"} {
		k := string(AppendDescriptorKey(nil, d, entries))
		if other, ok := seen[k]; ok {
			t.Errorf("domains %q and %q share the key %q", d, other, k)
		}
		seen[k] = d
	}
}

// Records an older version keyed "rl:{h<fnv>}…" move to today's key.
func TestLegacyDomainKey(t *testing.T) {
	legacy := func(domain, rest string) []byte {
		return []byte("rl:{h" + string(appendHex16(nil, fnv64a(domain))) + "}" + strconv.Itoa(len(domain)) + ":" + domain + rest)
	}
	entries := []Entry{{Key: "k", Value: "v"}}
	for _, d := range []string{"", "a{b}c", "{}", "x}y{"} {
		want := string(AppendDescriptorKey(nil, d, entries)) + "#override"
		got, ok := LegacyDomainKey(legacy(d, "/1:k=1:v#override"))
		if !ok || string(got) != want {
			t.Errorf("domain %q: %q %v, want %q", d, got, ok, want)
		}
	}
	r := &Rule{Domain: "a{b}c", Algorithm: Fixed}
	for _, key := range [][]byte{
		AppendDescriptorKey(nil, "api", entries),                                        // a plain domain's record
		AppendDescriptorKey(nil, "a{b}c", nil),                                          // today's layout
		r.AppendKey(nil, entries),                                                       // a counter
		legacy("api", "#scale"),                                                         // a plain domain never had the legacy form
		[]byte(strings.Replace(string(legacy("a{b}c", "#scale")), "}5:", "}4:", 1)),     // wrong length
		[]byte(strings.Replace(string(legacy("a{b}c", "#scale")), "rl:{h", "rl:{H", 1)), // not the form
		legacy("a{b}c", "")[:20],
		[]byte("rl:{h0000000000000000}99999999999999999999:x"),
	} {
		if got, ok := LegacyDomainKey(key); ok {
			t.Errorf("LegacyDomainKey(%q) = %q: not a legacy key", key, got)
		}
	}
}

const shardRules = `domain: api
sluice: {shard_key: tenant}
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - key: path
        rate_limit: {unit: second, requests_per_unit: 5}
  - key: region
    descriptors:
      - key: tenant
        rate_limit: {unit: minute, requests_per_unit: 7}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: team
    value: "t*"
    share_threshold: true
    descriptors:
      - key: tenant
        value: "big*"
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 3}
`

// With a shard_key, every counter of a descriptor that carries the entry
// is in the slot of its value, at any level; the others spread as
// before; keys of distinct descriptors stay distinct.
func TestShardKeyCoLocatesCounters(t *testing.T) {
	d, err := Parse("shard.yaml", []byte(shardRules))
	if err != nil {
		t.Fatal(err)
	}
	if d.ShardKey != "tenant" {
		t.Fatalf("shard key %q", d.ShardKey)
	}
	seen := map[string]bool{}
	for i := range 300 {
		v := fmt.Sprintf("acme-%d{x%d}", i, i%7)
		want := slot.Of([]byte(v))
		for _, entries := range [][]Entry{
			{{Key: "tenant", Value: v}},
			{{Key: "tenant", Value: v}, {Key: "path", Value: "/a"}},
			{{Key: "region", Value: "eu"}, {Key: "tenant", Value: v}},
		} {
			key := d.Match(entries).AppendKey(nil, entries)
			if got := slot.Of(key); got != want {
				t.Fatalf("%q: slot %d, want the slot of %q, %d", key, got, v, want)
			}
			if seen[string(key)] {
				t.Fatalf("two descriptors share %q", key)
			}
			seen[string(key)] = true
		}
		// Without the entry: the 16-digit hash, spread as before.
		u := []Entry{{Key: "user", Value: v}}
		if key := string(d.Match(u).AppendKey(nil, u)); len(key) < 21 || key[20] != '}' {
			t.Fatalf("a descriptor without the shard key: %q", key)
		}
	}
	// A shared (share_threshold) level counts every match on one counter:
	// the pattern's slot, whatever the value.
	a := []Entry{{Key: "team", Value: "t1"}, {Key: "tenant", Value: "big-one"}}
	b := []Entry{{Key: "team", Value: "t2"}, {Key: "tenant", Value: "big-two"}}
	ka, kb := d.Match(a).AppendKey(nil, a), d.Match(b).AppendKey(nil, b)
	if string(ka) != string(kb) || slot.Of(ka) != slot.Of([]byte("big*")) {
		t.Fatalf("shared counters: %q %q", ka, kb)
	}
	for _, bad := range []string{
		"domain: x\nsluice: {shard_key: \"\"}\n",
		"domain: x\nsluice: {shard: tenant}\n",
		"domain: x\nsluice: [tenant]\n",
	} {
		if _, err := Parse("bad.yaml", []byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func BenchmarkAppendKeyShardKey(b *testing.B) {
	d, err := Parse("shard.yaml", []byte(shardRules))
	if err != nil {
		b.Fatal(err)
	}
	entries := []Entry{{Key: "tenant", Value: "acme"}, {Key: "path", Value: "/a"}}
	r := d.Match(entries)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendKey(buf[:0], entries)
	}
}
