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
