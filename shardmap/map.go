package shardmap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/slot"
)

// ErrMap is every error of a map that does not load.
var ErrMap = errors.New("shardmap: invalid cluster map")

// Map is a validated cluster map. It is not changed once made.
type Map struct {
	// Epoch orders maps: a later map has a greater epoch.
	Epoch uint64
	// Groups are the groups in the file's order.
	Groups []Group
	// owner is the index in Groups of each slot's owner.
	owner [slot.Count]uint16
}

// Group is one Raft group: the slots it owns and its members.
type Group struct {
	// ID names the group (MYSHARDID is derived from it).
	ID string
	// Ranges are the slot ranges it owns, as the file lists them.
	Ranges []Range
	// Members are its members, by id.
	Members []cluster.Peer
	// Epoch is the epoch its slots were last claimed at, when the map
	// says (0: the map's).
	Epoch uint64
	// Removed is set on a group removed from a running cluster (CLUSTER
	// REMOVEGROUP): it owns nothing and is no longer asked anything.
	Removed bool
}

// Range is the slots From to To, both included.
type Range struct{ From, To int }

func (r Range) String() string {
	if r.From == r.To {
		return strconv.Itoa(r.From)
	}
	return strconv.Itoa(r.From) + "-" + strconv.Itoa(r.To)
}

// Owner is the group that owns slot s (0 ≤ s < slot.Count).
func (m *Map) Owner(s int) *Group { return &m.Groups[m.owner[s]] }

// Owns reports whether the group owns slot s.
func (g *Group) Owns(s int) bool {
	for _, r := range g.Ranges {
		if r.From <= s && s <= r.To {
			return true
		}
	}
	return false
}

// Member finds the member named id and its group.
func (m *Map) Member(id string) (*Group, cluster.Peer, bool) {
	for i := range m.Groups {
		for _, p := range m.Groups[i].Members {
			if p.ID == id {
				return &m.Groups[i], p, true
			}
		}
	}
	return nil, cluster.Peer{}, false
}

// OneGroup is the map --peers describes: one group, g1, owning every
// slot, at epoch 0.
func OneGroup(peers []cluster.Peer) *Map {
	return &Map{Groups: []Group{{ID: "g1", Ranges: []Range{{0, slot.Count - 1}}, Members: slices.Clone(peers)}}}
}

// Load reads and parses the map file at path.
func Load(path string) (*Map, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMap, err)
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// file is the map's YAML; a key it does not name is an error.
type file struct {
	Epoch  *int64      `yaml:"epoch"`
	Groups []fileGroup `yaml:"groups"`
}

type fileGroup struct {
	ID      string            `yaml:"id"`
	Slots   []string          `yaml:"slots"`
	Members map[string]string `yaml:"members"`
	// Epoch is the epoch the group's log owns its slots at, when it is
	// not the map's (maps a running cluster writes: CLUSTER SLUICEMAP).
	Epoch *int64 `yaml:"epoch"`
}

// maxMapBytes bounds a map file (a thousand groups fit in far less).
const maxMapBytes = 4 << 20

// Parse reads a map from YAML and validates it.
func Parse(data []byte) (*Map, error) {
	if len(data) > maxMapBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMap, len(data), maxMapBytes)
	}
	// A field the map does not know is refused, as the rules parser
	// refuses one: a misspelled "slot:" read as absent would start a group
	// that owns nothing.
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %w", ErrMap, err)
	}
	if f.Epoch == nil || *f.Epoch < 1 {
		return nil, fmt.Errorf("%w: epoch must be a positive integer", ErrMap)
	}
	if len(f.Groups) == 0 {
		return nil, fmt.Errorf("%w: no groups", ErrMap)
	}
	if len(f.Groups) > slot.Count {
		return nil, fmt.Errorf("%w: %d groups, more than there are slots", ErrMap, len(f.Groups))
	}
	m := &Map{Epoch: uint64(*f.Epoch)}
	groupIDs := map[string]bool{}
	memberOf := map[string]string{} // member id → its group
	addrOf := map[string]string{}   // address → the member using it
	for _, fg := range f.Groups {
		g, err := parseGroup(fg, groupIDs, memberOf, addrOf)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMap, err)
		}
		m.Groups = append(m.Groups, g)
	}
	if err := m.assign(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMap, err)
	}
	return m, nil
}

func parseGroup(fg fileGroup, groupIDs map[string]bool, memberOf, addrOf map[string]string) (Group, error) {
	switch {
	case fg.ID == "":
		return Group{}, errors.New("a group has no id")
	case strings.ContainsAny(fg.ID, " \t\r\n"):
		return Group{}, fmt.Errorf("group id %q holds white space", fg.ID)
	case groupIDs[fg.ID]:
		return Group{}, fmt.Errorf("group id %q appears twice", fg.ID)
	case fg.Epoch != nil && *fg.Epoch < 1:
		return Group{}, fmt.Errorf("group %s: epoch must be a positive integer", fg.ID)
	case len(fg.Members) == 0:
		return Group{}, fmt.Errorf("group %s has no members", fg.ID)
	}
	groupIDs[fg.ID] = true
	g := Group{ID: fg.ID}
	if fg.Epoch != nil {
		g.Epoch = uint64(*fg.Epoch)
	}
	for _, s := range fg.Slots {
		r, err := parseRange(s)
		if err != nil {
			return Group{}, fmt.Errorf("group %s: %w", fg.ID, err)
		}
		g.Ranges = append(g.Ranges, r)
	}
	ids := make([]string, 0, len(fg.Members))
	for id := range fg.Members {
		ids = append(ids, id)
	}
	slices.Sort(ids) // a YAML mapping has no order: members go by id
	for _, id := range ids {
		if other, ok := memberOf[id]; ok {
			return Group{}, fmt.Errorf("member id %q is in groups %s and %s", id, other, fg.ID)
		}
		memberOf[id] = fg.ID
		peers, err := cluster.ParsePeers(id + "=" + fg.Members[id])
		if err != nil {
			return Group{}, fmt.Errorf("group %s: %w", fg.ID, err)
		}
		p := peers[0]
		// A client address is one member's, and no member's Raft address.
		// A Raft address may be shared by members of different groups: one
		// process hosting them carries their groups over one Raft port
		// (package raftmux).
		if other, ok := addrOf["c "+p.ClientAddr]; ok {
			return Group{}, fmt.Errorf("address %s is used by members %s and %s", p.ClientAddr, other, id)
		}
		if other, ok := addrOf["r "+p.ClientAddr]; ok {
			return Group{}, fmt.Errorf("address %s is used by members %s and %s", p.ClientAddr, other, id)
		}
		if other, ok := addrOf["c "+p.RaftAddr]; ok {
			return Group{}, fmt.Errorf("address %s is used by members %s and %s", p.RaftAddr, other, id)
		}
		if other, ok := addrOf["r "+p.RaftAddr+" "+fg.ID]; ok {
			return Group{}, fmt.Errorf("address %s is used by members %s and %s of group %s", p.RaftAddr, other, id, fg.ID)
		}
		addrOf["c "+p.ClientAddr] = id
		addrOf["r "+p.RaftAddr] = id
		addrOf["r "+p.RaftAddr+" "+fg.ID] = id
		g.Members = append(g.Members, p)
	}
	return g, nil
}

// parseRange reads "from-to" or one slot.
func parseRange(s string) (Range, error) {
	s = strings.TrimSpace(s)
	from, to, ok := slot.ParseRange(s)
	if !ok {
		return Range{}, fmt.Errorf("slot range %q is not <from>-<to> or one slot in 0-%d, from before to", s, slot.Count-1)
	}
	return Range{from, to}, nil
}

// assign fills owner, refusing a slot owned twice or by no group.
func (m *Map) assign() error {
	const none = ^uint16(0)
	for i := range m.owner {
		m.owner[i] = none
	}
	for gi := range m.Groups {
		for _, r := range m.Groups[gi].Ranges {
			for s := r.From; s <= r.To; s++ {
				if o := m.owner[s]; o != none {
					return fmt.Errorf("group %s's range %s overlaps group %s's %s (slot %d)",
						m.Groups[gi].ID, r, m.Groups[o].ID, m.Groups[o].rangeOf(s), s)
				}
				m.owner[s] = uint16(gi)
			}
		}
	}
	for s := 0; s < slot.Count; s++ {
		if m.owner[s] != none {
			continue
		}
		end := s
		for end+1 < slot.Count && m.owner[end+1] == none {
			end++
		}
		return fmt.Errorf("slots %s are owned by no group", Range{s, end})
	}
	return nil
}

// rangeOf is the range of g that holds slot s.
func (g *Group) rangeOf(s int) Range {
	for _, r := range g.Ranges {
		if r.From <= s && s <= r.To {
			return r
		}
	}
	return Range{}
}
