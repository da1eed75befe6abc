package slot

import "testing"

func TestSlot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int
	}{
		{"foo", 12182},
		{"bar", 5061},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", 8363},
		{"foo{{bar}}zap", 4015},
		{"foo{bar}{zap}", 5061},
		{"", 0},
		{"123456789", 0x31C3 & 16383},
	} {
		if got := Of([]byte(tc.key)); got != tc.want {
			t.Errorf("Of(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
}

// The XMODEM check value for "123456789" is 0x31C3.
func TestCRC16CheckValue(t *testing.T) {
	if got := CRC16([]byte("123456789")); got != 0x31C3 {
		t.Fatalf("CRC16 check value = %#x, want 0x31c3", got)
	}
}

func BenchmarkSlot(b *testing.B) {
	key := []byte("key:000000012345")
	for b.Loop() {
		Of(key)
	}
}

func TestTagLandsInItsSlot(t *testing.T) {
	seen := map[[4]byte]bool{}
	for s := range Count {
		tag := Tag(s)
		for _, c := range tag {
			if c == '{' || c == '}' || c < 0x40 || c > 0x4f {
				t.Fatalf("Tag(%d) = %q holds %q", s, tag, c)
			}
		}
		key := append([]byte("rl:{"), tag[:]...)
		key = append(key, "}5:a{b}c/1:k=1:v#override"...)
		if got := Of(key); got != s {
			t.Fatalf("a key tagged Tag(%d) = %q is in slot %d", s, tag, got)
		}
		if seen[tag] {
			t.Fatalf("Tag(%d) = %q repeats", s, tag)
		}
		seen[tag] = true
	}
}

func TestRangesRoundTrip(t *testing.T) {
	for _, rs := range [][][2]int{nil, {{0, 0}}, {{0, 9}, {100, 16383}}} {
		got, ok := ParseRanges(FormatRanges(rs))
		if !ok || len(got) != len(rs) {
			t.Fatalf("%v: %v %v", rs, got, ok)
		}
		for i := range rs {
			if got[i] != rs[i] {
				t.Fatalf("%v: %v", rs, got)
			}
		}
	}
	if _, ok := ParseRanges("1-2,x"); ok {
		t.Fatal("a bad range parsed")
	}
}
