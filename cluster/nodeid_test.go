package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadNodeIDCreatesThenKeeps(t *testing.T) {
	dir := t.TempDir()
	id, err := LoadNodeID(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !ValidNodeID(id) {
		t.Fatalf("new id %q is not 40 lower-case hex", id)
	}
	again, err := LoadNodeID(dir)
	if err != nil || again != id {
		t.Fatalf("second load = %q, %v; want %q", again, err, id)
	}
	other, err := LoadNodeID(t.TempDir())
	if err != nil || other == id {
		t.Fatalf("another dir got %q, %v: ids must be random", other, err)
	}
}

func TestLoadNodeIDAcceptsAFileWithoutNewline(t *testing.T) {
	dir := t.TempDir()
	want := strings.Repeat("ab", 20)
	os.WriteFile(filepath.Join(dir, NodeIDFile), []byte(want), 0o644)
	if got, err := LoadNodeID(dir); err != nil || got != want {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestLoadNodeIDRejectsCorruptFiles(t *testing.T) {
	for _, content := range []string{
		"",
		"not hex at all",
		strings.Repeat("A", 40) + "\n", // upper case is not a Redis node id
		strings.Repeat("a", 39) + "\n",
		strings.Repeat("a", 41) + "\n",
		strings.Repeat("a", 40) + "\n\n",
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, NodeIDFile)
		os.WriteFile(path, []byte(content), 0o644)
		_, err := LoadNodeID(dir)
		if !errors.Is(err, ErrNodeIDCorrupt) || !strings.Contains(err.Error(), path) {
			t.Errorf("content %q: err %v, want ErrNodeIDCorrupt naming %s", content, err, path)
		}
		if b, _ := os.ReadFile(path); string(b) != content {
			t.Errorf("content %q: the corrupt file was rewritten", content)
		}
	}
}

func TestShardIDIsStableAndDistinct(t *testing.T) {
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	if again := ShardID(strings.Clone(a)); ShardID(a) != again || ShardID(a) == ShardID(b) || !ValidNodeID(ShardID(a)) {
		t.Fatalf("ShardID(a)=%q ShardID(b)=%q", ShardID(a), ShardID(b))
	}
}

// Member n1 of one cluster is not member n1 of another: the id is derived
// from the member id and its Raft address, the same on every member.
func TestMemberNodeIDPerCluster(t *testing.T) {
	a, b := MemberNodeID("n1", "127.0.0.1:17001"), MemberNodeID("n1", "127.0.0.1:27001")
	if a == b || !ValidNodeID(a) || !ValidNodeID(b) {
		t.Fatalf("%s, %s", a, b)
	}
	if MemberNodeID("n1", "127.0.0.1:17001") != a {
		t.Fatal("not stable")
	}
}
