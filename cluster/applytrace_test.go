package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluice-rl/sluice/internal/failpoint"
)

// An armed apply trace gets a line per command applied — index, stamp,
// words, reply — after a line naming the member; none is opened when the
// point is not armed.
func TestApplyTrace(t *testing.T) {
	if tr, err := openApplyTrace(nil, "n1", 1); tr != nil || err != nil {
		t.Fatalf("not armed: %v, %v", tr, err)
	}
	file := filepath.Join(t.TempDir(), "trace")
	points, err := failpoint.Parse("apply-trace=append-to-" + file)
	if err != nil {
		t.Fatal(err)
	}
	f := newFSM()
	if f.trace, err = openApplyTrace(points, "n1", 0xab); err != nil {
		t.Fatal(err)
	}
	stamp := int64(4102444800) * 1e9
	f.Apply(&raft.Log{Index: 7, Type: raft.LogCommand, Data: AppendBatch(nil, stamp, [][][]byte{
		words("CL.THROTTLE", "k", "0", "1", "10"), words("NOSUCH", "x y")})})
	f.trace.close()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []string{
		"# member n1 proposer ab",
		`7 4102444800000000000 0/0 "CL.THROTTLE" "k" "0" "1" "10" -> "*5\r\n:0\r\n`,
		`7 4102444800000000000 0/0 "NOSUCH" "x y" -> "-ERR`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines:\n%s", len(lines), b)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want it to start %q", i, lines[i], w)
		}
	}
}
