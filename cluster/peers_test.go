package cluster

import (
	"errors"
	"reflect"
	"testing"
)

func TestParsePeers(t *testing.T) {
	got, err := ParsePeers("n1=127.0.0.1:7001@127.0.0.1:17001,n2=127.0.0.1:7002, n3=[::1]:7003@[::1]:9000")
	if err != nil {
		t.Fatal(err)
	}
	want := []Peer{
		{"n1", "127.0.0.1:7001", "127.0.0.1:17001"},
		{"n2", "127.0.0.1:7002", "127.0.0.1:17002"},
		{"n3", "[::1]:7003", "[::1]:9000"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{
		"", " ", "n1", "=127.0.0.1:1", "n1=127.0.0.1", "n1=127.0.0.1:0", "n1=127.0.0.1:70000",
		"n1=127.0.0.1:60000", // no room for +10000
		"n1=127.0.0.1:1,n1=127.0.0.1:2", "n1=127.0.0.1:1,n2=127.0.0.1:1",
		"n1=127.0.0.1:1@127.0.0.1:5,n2=127.0.0.1:2@127.0.0.1:5", "n1=127.0.0.1:1@127.0.0.1:1",
		"n1=:7001", "n1=127.0.0.1:7001@", "n1=127.0.0.1:7001,",
	} {
		if _, err := ParsePeers(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParsePeers(%q) = %v, want ErrConfig", bad, err)
		}
	}
}
