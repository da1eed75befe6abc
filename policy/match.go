package policy

import "strings"

// Entry is one key/value pair of a request descriptor.
type Entry struct {
	Key, Value string
}

// Domain is the parsed rules of one domain: a tree of descriptors, each
// level keyed by the descriptor's key and value.
type Domain struct {
	// Name is the domain.
	Name string
	// File is the source the domain was parsed from.
	File string
	// Rules lists every rule of the domain in file order.
	Rules []*Rule
	// ShardKey is the descriptor entry whose value puts a counter in its
	// slot (the domain's "sluice: {shard_key: …}"), "" for none: checks by
	// one value are then one group's in a sharded cluster.
	ShardKey string

	root node
}

// pair is a map key for a descriptor with a value. A struct of two strings
// lets a lookup use the request's strings as they are, without building a
// combined key (no allocation per lookup).
type pair struct{ key, value string }

// node is one descriptor: its rule, if any, and its children, split by how
// they match (envoy's order: exact value, then wildcards in file order, then
// the key alone).
type node struct {
	rule   *Rule
	exact  map[pair]*node
	wild   map[string][]wildcard
	anyVal map[string]*node
}

// wildcard is a descriptor whose value contains '*': each '*' matches any
// run of bytes, including none.
type wildcard struct {
	pattern string
	parts   []string // pattern split at '*', so matching allocates nothing
	shared  bool     // share_threshold: all matches use one counter
	next    *node
}

// child finds the descriptor one level down that entry e selects, and the
// wildcard it matched through (nil otherwise).
func (n *node) child(e Entry) (*node, *wildcard) {
	if c, ok := n.exact[pair{e.Key, e.Value}]; ok {
		return c, nil
	}
	if ws := n.wild[e.Key]; len(ws) > 0 {
		for i := range ws {
			if globMatch(ws[i].parts, e.Value) {
				return ws[i].next, &ws[i]
			}
		}
	}
	return n.anyVal[e.Key], nil
}

// Match returns the rule a descriptor selects, or nil when it is not
// limited. As in envoy, entry i is matched against the descriptors at
// nesting level i, trying the exact key and value first, then wildcard
// values in file order, then the key without value; the rule is the one on
// the descriptor reached by the last entry. A descriptor with more entries
// than the path is deep, or ending on a descriptor without rate_limit,
// matches nothing. Cost: one map lookup per entry (plus the wildcards of
// that key, if any); no allocation.
func (d *Domain) Match(entries []Entry) *Rule {
	if len(entries) == 0 {
		return nil
	}
	n := &d.root
	for _, e := range entries {
		next, _ := n.child(e)
		if next == nil {
			return nil
		}
		n = next
	}
	return n.rule
}

// globMatch reports whether value matches the pattern split at '*' into
// parts (at least two parts; the first is a prefix, the last a suffix, the
// ones between must appear in order without overlapping).
func globMatch(parts []string, value string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) ||
		!strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	mid := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(mid, p)
		if i < 0 {
			return false
		}
		mid = mid[i+len(p):]
	}
	return true
}
