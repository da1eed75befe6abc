package persist

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine"
)

// The documented byte layout, built by hand for one GCRA key.
func TestSnapshotLayout(t *testing.T) {
	ks := keyspace.New()
	put(t, ks, "a", keyspace.KindGCRA, 5, nil)
	var buf bytes.Buffer
	info, err := WriteSnapshot(&buf, ks, Header{Seq: 7, Created: 3, Applied: 4})
	mustOK(t, err)

	want := []byte("\x89SLUICE\n")
	want = append(want, 2, 7, 6, 8)                  // version, seq, created, applied (zigzag varints: 3 = 6, 4 = 8)
	want = append(want, byte(keyspace.KindGCRA), 1)  // kind, key length
	want = append(want, 'a', 5, 0, 0, 0, 0, 0, 0, 0) // key, word LE
	want = append(want, 0)                           // no state
	want = append(want, 0, 1)                        // end of records, count
	want = binary.LittleEndian.AppendUint32(want, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)))
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("snapshot bytes\n got %x\nwant %x", buf.Bytes(), want)
	}
	if info.Keys != 1 || info.Bytes != int64(len(want)) {
		t.Fatalf("info %+v, want 1 key, %d bytes", info, len(want))
	}
}

// Every kind survives WriteSnapshot and ReadSnapshot byte for byte.
func TestSnapshotRoundTrip(t *testing.T) {
	ks := keyspace.New()
	fillEveryKind(t, ks, 50, t0)
	want := dump(t, ks, t0)
	var buf bytes.Buffer
	info, err := WriteSnapshot(&buf, ks, Header{Seq: 42, Created: t0, Applied: t0})
	mustOK(t, err)
	if info.Keys != int64(len(want)) || info.Bytes != int64(buf.Len()) {
		t.Fatalf("info %+v for %d keys, %d bytes", info, len(want), buf.Len())
	}
	got := map[string]keyDump{}
	zones := zoneCache{}
	h, err := ReadSnapshot(&buf, func(_ Header, rec Record) error {
		obj, err := machine.DecodeState(rec.Kind, rec.State, zones.load)
		if err != nil {
			return err
		}
		b, err := machine.EncodeState(nil, rec.Kind, obj)
		if err != nil {
			return err
		}
		if _, dup := got[string(rec.Key)]; dup {
			t.Errorf("key %q twice", rec.Key)
		}
		got[string(rec.Key)] = keyDump{rec.Kind, rec.Word, string(b)}
		return nil
	})
	mustOK(t, err)
	if h != (Header{Version: SnapshotVersion, Seq: 42, Created: t0, Applied: t0}) {
		t.Fatalf("header %+v", h)
	}
	sameKeys(t, got, want)
}

// Version 1 files, written before snapshots carried the applied instant,
// are still read: their keys were judged live at Created, which stands in.
func TestSnapshotVersion1(t *testing.T) {
	v1 := []byte("\x89SLUICE\n")
	v1 = append(v1, 1, 7, 6)                     // version 1, seq, created (3)
	v1 = append(v1, byte(keyspace.KindGCRA), 1)  // kind, key length
	v1 = append(v1, 'a', 5, 0, 0, 0, 0, 0, 0, 0) // key, word LE
	v1 = append(v1, 0, 0, 1)                     // no state, end of records, count
	v1 = binary.LittleEndian.AppendUint32(v1, crc32.Checksum(v1, crc32.MakeTable(crc32.Castagnoli)))
	ks := keyspace.New()
	h, err := LoadSnapshot(bytes.NewReader(v1), ks)
	mustOK(t, err)
	if h.Version != 1 || h.Created != 3 || h.Applied != 3 || ks.Live(4, nil) != 1 {
		t.Fatalf("header %+v, %d keys live", h, ks.Live(4, nil))
	}
}

// Expired keys are not written.
func TestSnapshotSkipsExpired(t *testing.T) {
	ks := keyspace.New()
	put(t, ks, "live", keyspace.KindGCRA, t0+1, nil)
	put(t, ks, "dead", keyspace.KindGCRA, t0, nil)
	var buf bytes.Buffer
	info, err := WriteSnapshot(&buf, ks, Header{Created: 1, Applied: t0})
	mustOK(t, err)
	if info.Keys != 1 {
		t.Fatalf("%d keys written, want 1", info.Keys)
	}
}

func smallSnapshot(t *testing.T) []byte {
	ks := keyspace.New()
	fillEveryKind(t, ks, 2, t0)
	var buf bytes.Buffer
	_, err := WriteSnapshot(&buf, ks, Header{Seq: 3, Created: t0})
	mustOK(t, err)
	return buf.Bytes()
}

func readAll(b []byte) error {
	_, err := ReadSnapshot(bytes.NewReader(b), func(Header, Record) error { return nil })
	return err
}

// Every single-byte change and every truncation is detected.
func TestSnapshotCorruption(t *testing.T) {
	good := smallSnapshot(t)
	mustOK(t, readAll(good))
	for i := range good {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(good)
			bad[i] ^= mask
			err := readAll(bad)
			if err == nil {
				t.Fatalf("byte %d ^ %#x: no error", i, mask)
			}
			if !errors.Is(err, ErrCorruptSnapshot) && !errors.Is(err, ErrNotSnapshot) && !errors.Is(err, ErrSnapshotVersion) {
				t.Fatalf("byte %d ^ %#x: %v is not a snapshot error", i, mask, err)
			}
		}
	}
	for n := range len(good) {
		if err := readAll(good[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", n)
		}
	}
	if err := readAll(append(bytes.Clone(good), 0)); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("trailing byte: %v", err)
	}
}

func TestSnapshotVersionAndMagic(t *testing.T) {
	good := smallSnapshot(t)
	newer := bytes.Clone(good)
	newer[len(snapshotMagic)] = SnapshotVersion + 1
	if err := readAll(newer); !errors.Is(err, ErrSnapshotVersion) {
		t.Fatalf("newer version: %v", err)
	}
	if err := readAll([]byte("REDIS0011")); !errors.Is(err, ErrNotSnapshot) {
		t.Fatalf("an RDB file: %v", err)
	}
	if err := readAll(nil); !errors.Is(err, ErrNotSnapshot) {
		t.Fatalf("empty file: %v", err)
	}
}

// A length field claiming far more than the input holds fails (the reader
// grows its buffer only as bytes arrive), as does one past the bound.
func TestSnapshotHugeLength(t *testing.T) {
	for _, n := range []uint64{maxKeyLen, maxKeyLen + 1, 1 << 62} {
		b := []byte(snapshotMagic)
		b = append(b, SnapshotVersion, 0, 0, byte(keyspace.KindGCRA))
		b = binary.AppendUvarint(b, n)
		if err := readAll(b); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("key length %d: %v", n, err)
		}
	}
}

func FuzzSnapshotReader(f *testing.F) {
	ks := keyspace.New()
	fillEveryKind(f, ks, 1, t0)
	var buf bytes.Buffer
	if _, err := WriteSnapshot(&buf, ks, Header{Seq: 1, Created: t0}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(snapshotMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		zones := zoneCache{}
		var recs []Record
		err := readAll(b)
		_, _ = ReadSnapshot(bytes.NewReader(b), func(_ Header, rec Record) error {
			_, derr := machine.DecodeState(rec.Kind, rec.State, zones.load)
			recs = append(recs, rec)
			return derr
		})
		if err == nil && len(b) < len(snapshotMagic) {
			t.Fatalf("accepted %d bytes", len(b))
		}
	})
}
