package cluster

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// RaftPortOffset is added to a peer's client port when its raft address is
// not given, as Redis Cluster puts its bus on the client port + 10000.
const RaftPortOffset = 10000

// ErrPeers: a --peers list that does not parse or names a member twice.
var ErrPeers = errors.New("cluster: invalid peer list")

// Peer is one member of a raft cluster as --peers names it.
type Peer struct {
	// ID names the member; raft uses it as the server id.
	ID string
	// ClientAddr is the host:port clients reach it on (RESP).
	ClientAddr string
	// RaftAddr is the host:port members replicate to it on.
	RaftAddr string
}

// ParsePeers reads a comma-separated list of id=client-addr[@raft-addr],
// every member of the cluster including this node, e.g.
//
//	n1=127.0.0.1:7001@127.0.0.1:17001,n2=127.0.0.1:7002
//
// A missing raft address is the client host with the client port +
// RaftPortOffset. Addresses come back as net.JoinHostPort writes them. Ids
// and addresses must be unique: two members on one address would be one
// process counted twice towards a majority.
func ParsePeers(s string) ([]Peer, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: the list is empty", ErrPeers)
	}
	items := strings.Split(s, ",")
	peers := make([]Peer, 0, len(items))
	ids := make(map[string]bool, len(items))
	addrs := make(map[string]string, 2*len(items)) // address → the id using it
	for i, item := range items {
		p, err := parsePeer(item)
		if err != nil {
			return nil, fmt.Errorf("%w: member %d %q: %w", ErrPeers, i+1, item, err)
		}
		if ids[p.ID] {
			return nil, fmt.Errorf("%w: id %q appears twice", ErrPeers, p.ID)
		}
		ids[p.ID] = true
		for _, a := range []string{p.ClientAddr, p.RaftAddr} {
			if other, ok := addrs[a]; ok {
				return nil, fmt.Errorf("%w: address %s is used by %s and %s", ErrPeers, a, other, p.ID)
			}
			addrs[a] = p.ID
		}
		peers = append(peers, p)
	}
	return peers, nil
}

// parsePeer reads one id=client-addr[@raft-addr].
func parsePeer(item string) (Peer, error) {
	id, addrs, ok := strings.Cut(item, "=")
	if !ok {
		return Peer{}, errors.New("want id=host:port[@host:port]")
	}
	if id == "" {
		return Peer{}, errors.New("empty id")
	}
	if strings.ContainsAny(id, "@= \t\r\n") {
		return Peer{}, fmt.Errorf("id %q holds '@', '=' or white space", id)
	}
	client, raftAddr, hasRaft := strings.Cut(addrs, "@")
	host, port, err := splitAddr(client)
	if err != nil {
		return Peer{}, fmt.Errorf("client address: %w", err)
	}
	p := Peer{ID: id, ClientAddr: net.JoinHostPort(host, strconv.Itoa(port))}
	if hasRaft {
		rhost, rport, err := splitAddr(raftAddr)
		if err != nil {
			return Peer{}, fmt.Errorf("raft address: %w", err)
		}
		p.RaftAddr = net.JoinHostPort(rhost, strconv.Itoa(rport))
		return p, nil
	}
	if port+RaftPortOffset > 65535 {
		return Peer{}, fmt.Errorf("client port %d + %d is above 65535: give the raft address after '@'", port, RaftPortOffset)
	}
	p.RaftAddr = net.JoinHostPort(host, strconv.Itoa(port+RaftPortOffset))
	return p, nil
}

// splitAddr checks a host:port with a host and a port from 1 to 65535;
// the host is lower-cased so one address has one spelling.
func splitAddr(addr string) (host string, port int, err error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if host == "" {
		return "", 0, fmt.Errorf("%q has no host", addr)
	}
	port, err = strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 || ps[0] == '+' {
		return "", 0, fmt.Errorf("%q: port %q is not a number from 1 to 65535", addr, ps)
	}
	return strings.ToLower(host), port, nil
}
