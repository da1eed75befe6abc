package cluster

import (
	"errors"
	"reflect"
	"testing"
)

func TestParsePeers(t *testing.T) {
	tests := []struct {
		in   string
		want []Peer
	}{
		{
			"n1=127.0.0.1:7001@127.0.0.1:17001,n2=127.0.0.1:7002@127.0.0.1:17002,n3=127.0.0.1:7003@127.0.0.1:17003",
			[]Peer{
				{"n1", "127.0.0.1:7001", "127.0.0.1:17001"},
				{"n2", "127.0.0.1:7002", "127.0.0.1:17002"},
				{"n3", "127.0.0.1:7003", "127.0.0.1:17003"},
			},
		},
		// The raft address defaults to the client port + 10000 on the same host.
		{"n1=127.0.0.1:7001", []Peer{{"n1", "127.0.0.1:7001", "127.0.0.1:17001"}}},
		{"a=10.0.0.1:55535,b=10.0.0.2:6379@10.0.0.9:7000", []Peer{
			{"a", "10.0.0.1:55535", "10.0.0.1:65535"},
			{"b", "10.0.0.2:6379", "10.0.0.9:7000"},
		}},
		{"v6=[::1]:7001", []Peer{{"v6", "[::1]:7001", "[::1]:17001"}}},
		{"h=Node-A.example:7001@node-a.example:9000", []Peer{{"h", "node-a.example:7001", "node-a.example:9000"}}},
		// A high client port is fine when the raft address is given.
		{"x=127.0.0.1:60000@127.0.0.1:60001", []Peer{{"x", "127.0.0.1:60000", "127.0.0.1:60001"}}},
		// Ports are compared as numbers.
		{"x=127.0.0.1:07001", []Peer{{"x", "127.0.0.1:7001", "127.0.0.1:17001"}}},
	}
	for _, tt := range tests {
		got, err := ParsePeers(tt.in)
		if err != nil {
			t.Errorf("ParsePeers(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParsePeers(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParsePeersRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"  ",
		"n1=127.0.0.1:7001,",          // empty member
		",n1=127.0.0.1:7001",          // empty member
		"127.0.0.1:7001",              // no id
		"=127.0.0.1:7001",             // empty id
		"n 1=127.0.0.1:7001",          // space in id
		"n1=127.0.0.1",                // no port
		"n1=127.0.0.1:",               // empty port
		"n1=:7001",                    // no host
		"n1=127.0.0.1:0",              // port 0
		"n1=127.0.0.1:65536",          // port too high
		"n1=127.0.0.1:-1",             // negative port
		"n1=127.0.0.1:+7001",          // signed port
		"n1=127.0.0.1:http",           // named port
		"n1=127.0.0.1:7001@",          // empty raft address
		"n1=127.0.0.1:7001@127.0.0.1", // raft address without port
		"n1=127.0.0.1:7001@127.0.0.1:7002@127.0.0.1:7003",                   // two raft addresses
		"n1=127.0.0.1:60000",                                                // default raft port above 65535
		"n1=127.0.0.1:7001,n1=127.0.0.1:7002",                               // duplicate id
		"n1=127.0.0.1:7001,n2=127.0.0.1:7001",                               // duplicate client address
		"n1=127.0.0.1:7001,n2=127.0.0.1:17001",                              // a client address is another's raft address
		"n1=127.0.0.1:7001@127.0.0.1:9000,n2=127.0.0.1:7002@127.0.0.1:9000", // duplicate raft address
		"n1=127.0.0.1:7001@127.0.0.1:7001",                                  // own client and raft address clash
		"n1=LOCALHOST:7001,n2=localhost:7001",                               // same host spelled twice
	} {
		if got, err := ParsePeers(in); !errors.Is(err, ErrPeers) {
			t.Errorf("ParsePeers(%q) = %+v, %v; want ErrPeers", in, got, err)
		}
	}
}
