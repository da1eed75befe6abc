package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/shardmap"
	"github.com/sluice-rl/sluice/slot"
)

// IdentityFile is the file in the data directory that says whose state it
// holds: written at the first start, checked at every later one, so a
// directory is never served as something it is not — a member's started
// as a single node (which would serve it as an empty master and write a
// snapshot into it), as another member or group, or under a map that
// gives the slots to the groups differently at the epoch it started at
// (two groups would own the same slots).
const IdentityFile = "identity.json"

// ErrIdentity: the data directory holds another node's, group's or
// cluster's state than the flags start.
var ErrIdentity = errors.New("server: the data directory belongs to another node")

// Identity is what IdentityFile holds.
type Identity struct {
	// Role is "single" (no replication), "group" (--peers) or "member" (a
	// member of a sharded cluster: --cluster-map or --cluster-join).
	Role string `json:"role"`
	// Node and Group are the member's id and its group's (a --peers
	// member's group is "").
	Node  string `json:"node,omitempty"`
	Group string `json:"group,omitempty"`
	// Members are the ids of the group's members when it started, sorted.
	Members []string `json:"members,omitempty"`
	// MapEpoch and Split are the epoch of the newest cluster map this
	// member started with and a digest of which group it gives each slot
	// (splitDigest): another split at that epoch is refused.
	MapEpoch uint64 `json:"map_epoch,omitempty"`
	Split    string `json:"split,omitempty"`
}

// identityOf is the identity cfg starts.
func identityOf(cfg *Config) Identity {
	rep := &cfg.Replication
	switch {
	case rep.Map != nil:
		g, _, _ := rep.Map.Member(rep.NodeID)
		id := Identity{Role: "member", Node: rep.NodeID, Group: g.ID, Members: memberIDs(g.Members)}
		id.MapEpoch, id.Split = rep.Map.Epoch, splitDigest(rep.Map)
		return id
	case rep.Enabled():
		return Identity{Role: "group", Node: rep.NodeID, Members: memberIDs(rep.Peers)}
	}
	return Identity{Role: "single"}
}

func memberIDs(peers []cluster.Peer) []string {
	ids := make([]string, len(peers))
	for i, p := range peers {
		ids[i] = p.ID
	}
	slices.Sort(ids)
	return ids
}

// splitDigest is a digest of which group m gives each slot.
func splitDigest(m *shardmap.Map) string {
	h := sha256.New()
	for s := 0; s < slot.Count; {
		g := m.Owner(s)
		from := s
		for s < slot.Count && m.Owner(s) == g {
			s++
		}
		fmt.Fprintf(h, "%d-%d=%s;", from, s-1, g.ID)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// describe says id for people: "member g1n1 of group g1 of a sharded
// cluster".
func (id Identity) describe() string {
	switch id.Role {
	case "member":
		return fmt.Sprintf("member %s of group %s of a sharded cluster", id.Node, id.Group)
	case "group":
		return fmt.Sprintf("member %s of a replicated group (%s)", id.Node, strings.Join(id.Members, ", "))
	}
	return "a single node"
}

// startAs is the flags that start id, for the advice of a refusal.
func (id Identity) startAs() string {
	switch id.Role {
	case "member":
		return "--node-id " + id.Node + " with its cluster's --cluster-map (or --cluster-join)"
	case "group":
		return "--node-id " + id.Node + " with its group's --peers"
	}
	return "no --peers, --cluster-map or --cluster-join"
}

// checkIdentity compares cfg with the identity kept in its data directory
// and keeps cfg's: written at the first start (or adopted, said in the
// log, by a directory from before identities), refused with what to do
// when the directory is another node's. A member started with a later map
// than before keeps the later one's epoch and split.
func checkIdentity(cfg *Config, log *slog.Logger) error {
	path := filepath.Join(cfg.DataDir, IdentityFile)
	want := identityOf(cfg)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if used, _ := holdsState(cfg.DataDir); used {
			log.Info("the data directory has no identity yet: it is taken to be this node's", "dir", cfg.DataDir, "as", want.describe())
		}
		return writeIdentity(path, want)
	case err != nil:
		return fmt.Errorf("server: read %s: %w", path, err)
	}
	var had Identity
	if err := json.Unmarshal(b, &had); err != nil {
		return fmt.Errorf("%w: %s does not read (%v); if this directory is this node's, remove the file to adopt it", ErrIdentity, path, err)
	}
	refuse := func(what string) error {
		return fmt.Errorf("%w: %s holds the state of %s, %s; start it as that (%s), or give this node another --data-dir",
			ErrIdentity, cfg.DataDir, had.describe(), what, had.startAs())
	}
	switch {
	case had.Role != want.Role:
		return refuse("not of " + want.describe())
	case had.Node != want.Node:
		return refuse("not of node " + want.Node)
	case had.Group != want.Group:
		return refuse("not of group " + want.Group)
	case !shareAMember(had, want):
		return refuse("whose group had none of the members it is started with (" + strings.Join(want.Members, ", ") + ")")
	case want.Role == "member" && want.MapEpoch == had.MapEpoch && want.Split != had.Split:
		return fmt.Errorf("%w: the cluster map gives the slots to the groups otherwise than the map %s started with, at the same epoch %d: "+
			"two groups would own the same slots. A changed map needs a later epoch; a cluster grows with --cluster-join and CLUSTER ADDGROUP "+
			"(README: Growing and shrinking); or start %s with the map it started with",
			ErrIdentity, cfg.DataDir, want.MapEpoch, want.Node)
	case want.Role == "member" && want.MapEpoch > had.MapEpoch:
		had.MapEpoch, had.Split = want.MapEpoch, want.Split
		return writeIdentity(path, had)
	}
	return nil
}

// shareAMember reports whether the group want starts keeps one of the
// members had's group started with, besides the node itself: members come
// and go (RAFT ADD, RAFT REMOVE), but a group of none of them is
// another cluster's.
func shareAMember(had, want Identity) bool {
	others := func(ids []string) []string {
		return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == had.Node })
	}
	h, w := others(had.Members), others(want.Members)
	if len(h) == 0 || len(w) == 0 {
		return true
	}
	for _, id := range w {
		if slices.Contains(h, id) {
			return true
		}
	}
	return false
}

// holdsState reports whether dir holds anything but the files written
// before the identity (the node id, a joined member's map).
func holdsState(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if n := e.Name(); n != cluster.NodeIDFile && n != JoinedMapFile && n != IdentityFile+".tmp" {
			return true, nil
		}
	}
	return false, nil
}

// writeIdentity writes id to path, whole or not at all.
func writeIdentity(path string, id Identity) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("server: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("server: write %s: %w", path, err)
	}
	return nil
}
