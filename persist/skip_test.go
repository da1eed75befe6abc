package persist

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/slot"
)

// A key whose state cannot be encoded — of the wrong type, or one whose
// encoder panics — is left out of the snapshot, named and counted; every
// other key is written.
func TestSnapshotSkipsUnencodableKeys(t *testing.T) {
	ks := keyspace.New()
	put(t, ks, "good", keyspace.KindGCRA, t0+1e9, nil)
	put(t, ks, "wrong-type", keyspace.KindOverride, t0+1e9, "not an override")
	put(t, ks, "nil-state", keyspace.KindScale, t0+1e9, (*machine.ScaleState)(nil))
	var buf bytes.Buffer
	info, err := WriteSnapshot(&buf, ks, Header{Seq: 1, Created: t0, Applied: t0})
	mustOK(t, err)
	if info.Keys != 1 {
		t.Fatalf("%d keys written, want 1", info.Keys)
	}
	if info.Skipped == nil || len(info.Skipped.Keys) != 2 {
		t.Fatalf("skipped %+v, want the two bad keys", info.Skipped)
	}
	names := strings.Join(info.Skipped.Keys, ",")
	if !strings.Contains(names, "wrong-type") || !strings.Contains(names, "nil-state") {
		t.Fatalf("skipped keys %q", names)
	}
	if !errors.Is(info.Skipped, ErrUnencodable) {
		t.Fatalf("skipped error %v does not wrap ErrUnencodable", info.Skipped)
	}
	restored := keyspace.New()
	if _, err := LoadSnapshot(&buf, restored); err != nil {
		t.Fatal(err)
	}
	if n := restored.Live(t0, nil); n != 1 {
		t.Fatalf("restored %d keys, want 1", n)
	}
}

// A record whose decoding panics is an error naming the key, not a crash.
func TestRestoreRecordPanicIsAnError(t *testing.T) {
	ks := keyspace.New()
	err := restoreRecord(ks, []byte("k"), 0, func() (keyspace.Kind, any, error) {
		var st *quota.State
		_ = st.Limit // a nil dereference, as a decoder bug would make
		return keyspace.KindQuota, st, nil
	})
	if err == nil || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("err %v, want the panic as an error", err)
	}
	// The slot's lock was released: the keyspace can be written.
	put(t, ks, "k", keyspace.KindGCRA, t0+1e9, nil)
}

// Records copied in a slot's own order and ordered after its lock are
// EncodeSlot's, byte for byte, on slots filled in random order.
func TestOrderRecordsIsEncodeSlotOrder(t *testing.T) {
	ks := keyspace.New()
	fillEveryKind(t, ks, 300, t0)
	for i := range 2000 {
		put(t, ks, "{s}"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+itoa(i*7919%2000), keyspace.KindGCRA, t0+1e9, nil)
	}
	sorted := 0
	for i := range slot.Count {
		s := ks.Lock(i)
		want, n1, err1 := EncodeSlot(nil, s, t0)
		raw, n2, err2 := EncodeSlotUnordered(nil, s, t0)
		s.Unlock()
		if err1 != nil || err2 != nil || n1 != n2 {
			t.Fatalf("slot %d: %v %v %d %d", i, err1, err2, n1, n2)
		}
		if !bytes.Equal(raw, want) {
			sorted++
		}
		got, err := OrderRecords(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("slot %d: ordered records differ from EncodeSlot's", i)
		}
	}
	if sorted == 0 {
		t.Fatal("no slot needed ordering: the test tests nothing")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
