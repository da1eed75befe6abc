package cluster

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ParsePeers reads --peers: members separated by commas, each
// id=client-addr[@raft-addr]. Without @raft-addr the Raft address is the
// client address with its port plus 10000, as Redis' cluster bus.
func ParsePeers(s string) ([]Peer, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: --peers is empty", ErrConfig)
	}
	var peers []Peer
	seen := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		id, addrs, ok := strings.Cut(item, "=")
		if !ok || id == "" {
			return nil, fmt.Errorf("%w: peer %q: want id=host:port[@host:port]", ErrConfig, item)
		}
		client, raftAddr, hasRaft := strings.Cut(addrs, "@")
		if err := checkHostPort(client); err != nil {
			return nil, fmt.Errorf("%w: peer %s: client address %q: %w", ErrConfig, id, client, err)
		}
		if !hasRaft {
			r, err := raftAddrFromClient(client)
			if err != nil {
				return nil, fmt.Errorf("%w: peer %s: %w", ErrConfig, id, err)
			}
			raftAddr = r
		} else if err := checkHostPort(raftAddr); err != nil {
			return nil, fmt.Errorf("%w: peer %s: raft address %q: %w", ErrConfig, id, raftAddr, err)
		}
		for _, k := range []string{"id " + id, "address " + client, "address " + raftAddr} {
			if other, dup := seen[k]; dup {
				return nil, fmt.Errorf("%w: peers %s and %s share the %s", ErrConfig, other, id, k)
			}
			seen[k] = id
		}
		if client == raftAddr {
			return nil, fmt.Errorf("%w: peer %s: the client and raft addresses are the same", ErrConfig, id)
		}
		peers = append(peers, Peer{ID: id, ClientAddr: client, RaftAddr: raftAddr})
	}
	return peers, nil
}

func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("no host")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q is not 1-65535", port)
	}
	return nil
}

func raftAddrFromClient(client string) (string, error) {
	host, port, _ := net.SplitHostPort(client)
	p, _ := strconv.Atoi(port)
	if p+busPortOffset > 65535 {
		return "", fmt.Errorf("client port %d + %d is past 65535: give @raft-addr", p, busPortOffset)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+busPortOffset)), nil
}
