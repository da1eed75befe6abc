package machine

import (
	"bytes"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/slot"
)

// encodeKeys is a SlotEncoder for tests: each live key's name.
func encodeKeys(dst []byte, s *keyspace.Slot, applied int64) ([]byte, int, error) {
	n := 0
	s.Keys(applied, func(key []byte, _ keyspace.Entry) bool {
		dst = append(append(dst, key...), 0)
		n++
		return true
	})
	return dst, n, nil
}

// A restore's Clear while a view is open leaves the view as it was frozen.
func TestClearKeepsAnOpenView(t *testing.T) {
	m := New(Options{})
	for i := range 200 {
		do(m, t0, "CL.THROTTLE", "k"+itoa(int64(i)), "5", "1", "3600")
	}
	f, err := m.Freeze(encodeKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	m.Clear()
	do(m, t0+1, "CL.THROTTLE", "restored", "5", "1", "3600")
	var all []byte
	keys := 0
	for i := range slot.Count {
		b, n, err := f.Slot(i)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
		keys += n
	}
	if keys != 200 || bytes.Contains(all, []byte("restored")) {
		t.Fatalf("the view holds %d keys (want the 200 frozen), restored key in it: %v", keys, bytes.Contains(all, []byte("restored")))
	}
}
