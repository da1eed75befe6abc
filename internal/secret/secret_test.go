package secret

import "testing"

func TestEqual(t *testing.T) {
	for _, tc := range []struct {
		want, got string
		ok        bool
	}{
		{"s3cret", "s3cret", true},
		{"s3cret", "s3cre", false},
		{"s3cret", "s3cret ", false},
		{"s3cret", "S3cret", false},
		{"", "", true},
		{"s3cret", "", false},
	} {
		if Equal(tc.want, tc.got) != tc.ok {
			t.Errorf("Equal(%q, %q) = %v", tc.want, tc.got, !tc.ok)
		}
	}
}
