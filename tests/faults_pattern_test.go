package tests

import (
	"strings"
	"testing"
)

// A huge glob pattern gets a clear error from every command that takes
// one, instead of the server compiling it (a 10 MB "[a]…" pattern used to
// take a gigabyte of memory, 40 MB ran the server out of memory); the
// server keeps answering.
func TestHugePatternIsRefused(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	if err := c.Do(ctx(t), "CL.THROTTLE", "k", 5, 10, 60).Err(); err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("[a]", 10<<20/3)
	for _, cmd := range [][]any{
		{"KEYS", huge},
		{"SCAN", 0, "MATCH", huge},
		{"CONFIG", "GET", huge},
		{"COMMAND", "LIST", "FILTERBY", "PATTERN", huge},
	} {
		err := c.Do(ctx(t), cmd...).Err()
		if err == nil || err.Error() != "ERR pattern is longer than 65536 bytes" {
			t.Errorf("%s with a %d-byte pattern: %v", cmd[0], len(huge), err)
		}
	}
	// A long pattern under the limit still works.
	keys, err := c.Keys(ctx(t), strings.Repeat("[k]", 10)+"*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("KEYS with a 30-byte pattern: %v %v", keys, err)
	}
	keys, err = c.Keys(ctx(t), "[k]").Result()
	if err != nil || len(keys) != 1 {
		t.Errorf("KEYS [k]: %v %v", keys, err)
	}
}
