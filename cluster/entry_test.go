package cluster

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// cmd builds a command from strings.
func cmd(args ...string) [][]byte {
	c := make([][]byte, len(args))
	for i, a := range args {
		c[i] = []byte(a)
	}
	return c
}

// decodeAll decodes entry and returns copies of its commands.
func decodeAll(t testing.TB, d *BatchDecoder, entry []byte) (int64, [][][]byte, error) {
	t.Helper()
	var got [][][]byte
	stamp, n, err := d.Decode(entry, func(args [][]byte) {
		c := make([][]byte, len(args))
		for i, a := range args {
			c[i] = bytes.Clone(a)
		}
		got = append(got, c)
	})
	if err == nil && n != len(got) {
		t.Fatalf("Decode reported %d commands, called fn %d times", n, len(got))
	}
	return stamp, got, err
}

func sameCmds(a, b [][][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if !bytes.Equal(a[i][j], b[i][j]) {
				return false
			}
		}
	}
	return true
}

func TestBatchRoundTrip(t *testing.T) {
	cases := []struct {
		name  string
		stamp int64
		cmds  [][][]byte
	}{
		{"tick", 1_795_000_000_000_000_000, nil},
		{"one command", 1, [][][]byte{cmd("CL.THROTTLE", "user123", "15", "30", "60")}},
		{"pipeline", -7, [][][]byte{
			cmd("SW.CHECK", "k", "10", "60", "COST", "2"),
			cmd("PING"),
			cmd("SET", "", ""), // empty arguments
			{},                 // no arguments
			cmd("GET", strings.Repeat("x", 300)),
		}},
		{"extreme stamp", math.MinInt64, [][][]byte{cmd("A")}},
		{"max stamp", math.MaxInt64, [][][]byte{cmd("B", "c")}},
	}
	var d BatchDecoder
	for _, tc := range cases {
		prefix := []byte("keep")
		entry := AppendBatch(prefix, tc.stamp, tc.cmds)
		if string(entry[:4]) != "keep" {
			t.Fatalf("%s: AppendBatch overwrote dst", tc.name)
		}
		stamp, got, err := decodeAll(t, &d, entry[4:])
		if err != nil {
			t.Fatalf("%s: Decode: %v", tc.name, err)
		}
		if stamp != tc.stamp || !sameCmds(got, tc.cmds) {
			t.Fatalf("%s: decoded %d %q, want %d %q", tc.name, stamp, got, tc.stamp, tc.cmds)
		}
		if s, err := BatchStamp(entry[4:]); err != nil || s != tc.stamp {
			t.Fatalf("%s: BatchStamp = %d, %v; want %d", tc.name, s, err, tc.stamp)
		}
	}
}

func TestBatchCorruptIsAnError(t *testing.T) {
	good := AppendBatch(nil, 99, [][][]byte{cmd("A", "bb"), cmd("C")})
	bad := map[string][]byte{
		"empty":                      nil,
		"header only in part":        good[:5],
		"no command count":           good[:batchHeader],
		"version":                    append([]byte{3}, good[1:]...),
		"version 2 without proposal": append([]byte{2}, good[1:]...),
		"truncated argument":         good[:len(good)-1],
		"trailing bytes":             append(bytes.Clone(good), 0),
		"count above bytes":          append(bytes.Clone(good[:batchHeader]), 0x7f, 1),
		"argc above bytes":           append(bytes.Clone(good[:batchHeader]), 1, 0x7f, 0),
		"length above bytes":         append(bytes.Clone(good[:batchHeader]), 1, 1, 5, 'a'),
		"non-minimal count":          append(bytes.Clone(good[:batchHeader]), 0x80, 0x00),
		"non-minimal length":         append(bytes.Clone(good[:batchHeader]), 1, 1, 0x81, 0x00, 'a'),
		"varint overflow":            append(bytes.Clone(good[:batchHeader]), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"second command too long":    append(bytes.Clone(good[:batchHeader]), 2, 1, 1, 'a', 1, 9, 'b'),
	}
	var d BatchDecoder
	for name, b := range bad {
		called := false
		_, _, err := d.Decode(b, func([][]byte) { called = true })
		if !errors.Is(err, ErrCorruptBatch) {
			t.Errorf("%s: Decode = %v, want ErrCorruptBatch", name, err)
		}
		if called {
			t.Errorf("%s: fn was called for a corrupt entry", name)
		}
	}
	if _, err := BatchStamp(good[:3]); !errors.Is(err, ErrCorruptBatch) {
		t.Errorf("BatchStamp of a short entry = %v, want ErrCorruptBatch", err)
	}
}

// The arguments handed to fn cannot be grown into the next one.
func TestBatchArgumentsAreCapped(t *testing.T) {
	entry := AppendBatch(nil, 0, [][][]byte{cmd("ab", "cd")})
	var d BatchDecoder
	_, _, err := d.Decode(entry, func(args [][]byte) {
		_ = append(args[0], 'X')
	})
	if err != nil {
		t.Fatal(err)
	}
	_, got, _ := decodeAll(t, &d, entry)
	if !sameCmds(got, [][][]byte{cmd("ab", "cd")}) {
		t.Fatalf("after appending to an argument the entry decodes to %q", got)
	}
}

// FuzzDecodeBatch: no input panics, every rejection wraps ErrCorruptBatch,
// and whatever decodes re-encodes to the same bytes.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(AppendBatch(nil, 0, nil))
	f.Add(AppendBatch(nil, 1_795_000_000_000_000_000, [][][]byte{cmd("CL.THROTTLE", "k", "15", "30", "60")}))
	f.Add(AppendBatch(nil, -1, [][][]byte{cmd("A"), {}, cmd("", "b")}))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x00})
	var d BatchDecoder
	f.Fuzz(func(t *testing.T, b []byte) {
		stamp, cmds, err := decodeAll(t, &d, b)
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("error %v does not wrap ErrCorruptBatch", err)
			}
			return
		}
		if again := AppendBatch(nil, stamp, cmds); !bytes.Equal(again, b) {
			t.Fatalf("%x decodes to %d %q, which encodes to %x", b, stamp, cmds, again)
		}
	})
}

// BenchmarkDecodeBatch decodes a 64-command pipeline; after the first
// call it allocates nothing.
func BenchmarkDecodeBatch(b *testing.B) {
	cmds := make([][][]byte, 64)
	for i := range cmds {
		cmds[i] = cmd("CL.THROTTLE", "user:12345", "15", "30", "60")
	}
	entry := AppendBatch(nil, 1_795_000_000_000_000_000, cmds)
	var d BatchDecoder
	total := 0
	apply := func(args [][]byte) { total += len(args) }
	b.SetBytes(int64(len(entry)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := d.Decode(entry, apply); err != nil {
			b.Fatal(err)
		}
	}
	if total == 0 {
		b.Fatal("no command decoded")
	}
}

// BenchmarkAppendBatch encodes the same pipeline into a reused buffer.
func BenchmarkAppendBatch(b *testing.B) {
	cmds := make([][][]byte, 64)
	for i := range cmds {
		cmds[i] = cmd("CL.THROTTLE", "user:12345", "15", "30", "60")
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendBatch(buf[:0], 1, cmds)
	}
}
