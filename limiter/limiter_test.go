package limiter

import "testing"

func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		ns, want int64
	}{
		{0, 0},
		{-5, 0},
		{999_999, 0},
		{1_000_000, 1},
		{1_000_500_000, 1},
		{1_000_999_999, 1},
		{1_001_000_000, 2},
		{1_900_000_000, 2},
		{2_000_000_000, 2},
	} {
		if got := Seconds(tc.ns); got != tc.want {
			t.Errorf("Seconds(%d) = %d, want %d", tc.ns, got, tc.want)
		}
	}
}

func TestReply(t *testing.T) {
	allowed := Result{Limit: 16, Remaining: 15, RetryAfter: Never, ResetAfter: 2_000_000_000}
	if got, want := allowed.Reply(), [5]int64{0, 16, 15, -1, 2}; got != want {
		t.Errorf("allowed reply = %v, want %v", got, want)
	}
	limited := Result{Limited: true, Limit: 16, RetryAfter: 500_000, ResetAfter: 60_000_000_000}
	if got, want := limited.Reply(), [5]int64{1, 16, 0, 0, 60}; got != want {
		t.Errorf("limited reply = %v, want %v", got, want)
	}
}
