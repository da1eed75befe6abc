package commands

import (
	"fmt"
	"sort"
	"strconv"
	"testing"
)

// scanAll runs a full SCAN iteration and returns every key with how often
// it came back, and the number of calls.
func scanAll(t *testing.T, c *Ctx, extra ...string) (map[string]int, int) {
	t.Helper()
	seen := map[string]int{}
	cursor, calls := "0", 0
	for {
		v := run(t, c, append([]string{"SCAN", cursor}, extra...)...)
		if len(v.elems) != 2 {
			t.Fatalf("SCAN reply %+v", v)
		}
		calls++
		for _, k := range v.elems[1].elems {
			seen[k.str]++
		}
		cursor = v.elems[0].str
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 || n > 16383 {
			t.Fatalf("cursor %q", cursor)
		}
		if cursor == "0" {
			return seen, calls
		}
		if calls > 20000 {
			t.Fatal("SCAN does not end")
		}
	}
}

func TestScanReturnsEveryKeyExactlyOnce(t *testing.T) {
	c := testCtx(fuzzEnv())
	want := map[string]bool{}
	for i := range 500 {
		k := fmt.Sprintf("user:%d", i)
		want[k] = true
		run(t, c, "CL.THROTTLE", k, "10", "1", "60")
	}
	run(t, c, "SW.CHECK", "sw:1", "10", "60")
	seen, calls := scanAll(t, c, "COUNT", "50", "MATCH", "user:*", "TYPE", "GCRA")
	if len(seen) != len(want) {
		t.Fatalf("SCAN found %d keys, want %d", len(seen), len(want))
	}
	for k, n := range seen {
		if !want[k] || n != 1 {
			t.Fatalf("key %q returned %d times", k, n)
		}
	}
	if calls < 5 || calls > 30 {
		t.Errorf("%d calls for 500 keys at COUNT 50", calls)
	}
	if seen, _ := scanAll(t, c, "TYPE", "sliding-counter"); len(seen) != 1 {
		t.Errorf("TYPE sliding-counter found %v", seen)
	}
	if seen, _ := scanAll(t, c, "TYPE", "string"); len(seen) != 0 {
		t.Errorf("TYPE string found %v", seen)
	}
	keys := run(t, c, "KEYS", "user:4?")
	var got []string
	for _, e := range keys.elems {
		got = append(got, e.str)
	}
	sort.Strings(got)
	if fmt.Sprint(got) != "[user:40 user:41 user:42 user:43 user:44 user:45 user:46 user:47 user:48 user:49]" {
		t.Errorf("KEYS user:4? = %v", got)
	}
	if v := run(t, c, "KEYS", "user:7"); len(v.elems) != 1 || v.elems[0].str != "user:7" {
		t.Errorf("KEYS user:7 = %+v", v)
	}
	if v := run(t, c, "KEYS", "*"); len(v.elems) != 501 {
		t.Errorf("KEYS * = %d keys", len(v.elems))
	}
}

func TestScanErrors(t *testing.T) {
	c := testCtx(fuzzEnv())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"SCAN", "x"}, "ERR invalid cursor"},
		{[]string{"SCAN", "-1"}, "ERR invalid cursor"},
		{[]string{"SCAN", "0", "COUNT", "0"}, errSyntax},
		{[]string{"SCAN", "0", "COUNT", "x"}, errNotInteger},
		{[]string{"SCAN", "0", "MATCH"}, errSyntax},
		{[]string{"SCAN", "0", "BOGUS", "1"}, errSyntax},
	} {
		if v := run(t, c, tc.args...); v.str != tc.want {
			t.Errorf("%v = %q, want %q", tc.args, v.str, tc.want)
		}
	}
	if v := run(t, c, "SCAN", "99999"); v.elems[0].str != "0" || len(v.elems[1].elems) != 0 {
		t.Errorf("SCAN past the last slot = %+v", v)
	}
}
