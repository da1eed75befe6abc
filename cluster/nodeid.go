package cluster

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// NodeIDFile is the file in the data directory that keeps the node id, so
// CLUSTER MYID and the topology replies name the same node across restarts
// (cluster clients key their node tables by id).
const NodeIDFile = "node-id"

// NodeIDLen is the length of a Redis Cluster node id: 40 hex characters.
const NodeIDLen = 40

// Errors of the node id file.
var (
	// ErrNodeIDCorrupt: the node id file exists but does not hold 40
	// lower-case hex characters.
	ErrNodeIDCorrupt = errors.New("cluster: node id file is corrupt")
)

// LoadNodeID returns the node id kept in dir, creating the file with a new
// random id when it is missing. A file that exists but holds anything else
// is an error naming it: silently replacing it would make clients see a
// different node.
func LoadNodeID(dir string) (string, error) {
	path := filepath.Join(dir, NodeIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSuffix(string(b), "\n")
		if !ValidNodeID(id) {
			return "", fmt.Errorf("%w: %s: want %d lower-case hex characters", ErrNodeIDCorrupt, path, NodeIDLen)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("cluster: read node id: %w", err)
	}
	var raw [NodeIDLen / 2]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("cluster: new node id: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	// Write then rename, so a crash never leaves a half-written id behind.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("cluster: write node id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("cluster: write node id: %w", err)
	}
	return id, nil
}

// ValidNodeID reports whether id is 40 lower-case hex characters, as Redis
// requires of node ids.
func ValidNodeID(id string) bool {
	if len(id) != NodeIDLen {
		return false
	}
	for i := range len(id) {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ShardID derives the shard id CLUSTER MYSHARDID and CLUSTER SHARDS report
// from the node id: a single-node cluster has one shard, and deriving it
// keeps it as stable as the node id without a second file.
func ShardID(nodeID string) string {
	sum := sha1.Sum([]byte("shard:" + nodeID))
	return hex.EncodeToString(sum[:])
}

// MemberNodeID is the 40-hex-character Redis Cluster node id a replicated
// member announces, derived from its member id and Raft address so every
// node names every other alike, and member n1 of one cluster is not member
// n1 of another (they cannot share a Raft address).
func MemberNodeID(memberID, raftAddr string) string {
	sum := sha1.Sum([]byte("member:" + memberID + "@" + raftAddr))
	return hex.EncodeToString(sum[:])
}

// KeepNodeID writes id to dir's node id file unless it holds it already:
// a replicated member's id is derived (MemberNodeID), and the file says
// what CLUSTER MYID says.
func KeepNodeID(dir, id string) error {
	path := filepath.Join(dir, NodeIDFile)
	if b, err := os.ReadFile(path); err == nil && strings.TrimSuffix(string(b), "\n") == id {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return fmt.Errorf("cluster: write node id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cluster: write node id: %w", err)
	}
	return nil
}
