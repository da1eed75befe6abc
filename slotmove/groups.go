package slotmove

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/shardmap"
)

// Growing and shrinking a running cluster. A new group's members are
// started with --cluster-join; CLUSTER ADDGROUP, sent to any group's
// leader, logs the group in that group (SLUICE.GROUPS ADD) and then in
// every other; each member learns it from its own log (SyncGroups), and the
// joining members from the live map a member gives them. The new group owns
// no slots until CLUSTER MIGRATESLOTS moves some to it. CLUSTER REMOVEGROUP
// removes a group that owns none.

// ErrNotEverywhere: a group change applied here but not yet in every
// group; sending it again is safe.
var ErrNotEverywhere = errors.New("slotmove: applied in this group, not yet in every group (send it again)")

// AddGroup adds group id with members to the cluster.
func (d *Driver) AddGroup(ctx context.Context, id string, members []cluster.Peer) error {
	if id == "" || strings.ContainsAny(id, " \t\r\n") {
		return fmt.Errorf("%w: a group id is one word, not %q", ErrRefused, id)
	}
	if !d.cfg.Serving() {
		return ErrNotLeader
	}
	m := d.cfg.Router.Map()
	// Client addresses are unique; a Raft address may be shared with other
	// groups' members (one process hosting them, one Raft port).
	ids, addrs := map[string]bool{}, map[string]bool{}
	for _, g := range m.Groups {
		if g.ID == id {
			if !g.Removed && slices.Equal(g.Members, members) {
				return d.logGroups(ctx, id, members) // again: make sure every group has it
			}
			return fmt.Errorf("%w: group id %s is taken", ErrRefused, id)
		}
		for _, p := range g.Members {
			ids[p.ID], addrs[p.ClientAddr] = true, true
		}
	}
	if len(members) == 0 {
		return fmt.Errorf("%w: a group needs members", ErrRefused)
	}
	rafts := map[string]bool{}
	for _, p := range members {
		switch {
		case ids[p.ID]:
			return fmt.Errorf("%w: member id %s is taken", ErrRefused, p.ID)
		case addrs[p.ClientAddr] || addrs[p.RaftAddr]:
			return fmt.Errorf("%w: address %s is taken", ErrRefused, p.ClientAddr)
		case rafts[p.RaftAddr] || rafts[p.ClientAddr]:
			return fmt.Errorf("%w: two members of the group at %s", ErrRefused, p.RaftAddr)
		}
		ids[p.ID], addrs[p.ClientAddr], rafts[p.RaftAddr] = true, true, true
	}
	return d.logGroups(ctx, id, members)
}

// logGroups applies SLUICE.GROUPS ADD here, then in every other group.
func (d *Driver) logGroups(ctx context.Context, id string, members []cluster.Peer) error {
	args := [][]byte{[]byte("SLUICE.GROUPS"), []byte("ADD"), []byte(id)}
	for _, p := range members {
		args = append(args, []byte(p.ID+"="+p.ClientAddr+"@"+p.RaftAddr))
	}
	return d.everywhere(ctx, args, id) // the new group starts from the live map
}

// everywhere applies a SLUICE.GROUPS change here, learns it, then applies
// it in every other group.
func (d *Driver) everywhere(ctx context.Context, args [][]byte, skip string) error {
	words := make([]any, len(args))
	for i, a := range args {
		words[i] = string(a)
	}
	if err := d.apply(words...); err != nil {
		return err
	}
	d.SyncGroups()
	if d.cfg.Propagate == nil {
		return nil
	}
	if err := d.cfg.Propagate(ctx, args, skip); err != nil {
		return fmt.Errorf("%w: %w", ErrNotEverywhere, err)
	}
	return nil
}

// RemoveGroup removes group id, which must own no slots, be another group
// than this one, and be no running migration's target.
func (d *Driver) RemoveGroup(ctx context.Context, id string) error {
	if !d.cfg.Serving() {
		return ErrNotLeader
	}
	g, ok := d.cfg.Router.GroupIndex(id)
	switch {
	case !ok:
		return fmt.Errorf("%w: no group %s", ErrRefused, id)
	case g == d.cfg.Router.Self():
		return fmt.Errorf("%w: a group cannot remove itself: send CLUSTER REMOVEGROUP to another group's leader", ErrRefused)
	case d.ownsSlots(ctx, g):
		return fmt.Errorf("%w: group %s owns slots: move them away first (CLUSTER MIGRATESLOTS)", ErrRefused, id)
	}
	for _, j := range d.Jobs() {
		if j.State == machine.JobRunning && j.TargetGroup == id {
			return fmt.Errorf("%w: migration %s moves slots to group %s", ErrRefused, j.ID, id)
		}
	}
	return d.everywhere(ctx, [][]byte{[]byte("SLUICE.GROUPS"), []byte("DEL"), []byte(id)}, "")
}

// ownsSlots reports whether group g owns slots: as its leader says (its
// log), or, when it cannot be asked, as this member's router last learned.
func (d *Driver) ownsSlots(ctx context.Context, g int) bool {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	if rep, err := d.cfg.ReportOf(ctx, g); err == nil && rep.Fenced {
		return len(rep.Slots.Ranges) > 0
	}
	return len(d.cfg.Router.Ranges(g)) > 0
}

// SyncGroups brings the router to the groups this group's log lists:
// groups added join it, removed ones are marked.
func (d *Driver) SyncGroups() {
	l := d.cfg.Machine.Groups()
	if l == nil {
		return
	}
	for _, spec := range l.Groups {
		g, known := d.cfg.Router.GroupIndex(spec.ID)
		switch {
		case spec.Removed && known:
			d.cfg.Router.RemoveGroup(g)
		case !spec.Removed && !known:
			var members []cluster.Peer
			for _, m := range spec.Members {
				ps, err := cluster.ParsePeers(m)
				if err != nil {
					d.cfg.Log.Error("a group's member does not parse", "group", spec.ID, "member", m, "err", err)
					continue
				}
				members = append(members, ps...)
			}
			if _, err := d.cfg.Router.AddGroup(shardmap.Group{ID: spec.ID, Members: members}); err != nil {
				d.cfg.Log.Error("a group cannot be added", "group", spec.ID, "err", err)
			}
		}
	}
}
