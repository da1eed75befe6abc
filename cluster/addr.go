package cluster

import (
	"net"
	"strconv"
)

// busPortOffset is Redis Cluster's: a node's bus port is its client port
// plus 10000. sluice's Raft address follows it when none is given.
const busPortOffset = 10000

// busToClient is the client address of a node whose Raft address is
// raftAddr, by the bus-port convention; raftAddr itself if it has no
// port above the offset.
func busToClient(raftAddr string) string {
	host, port, err := net.SplitHostPort(raftAddr)
	if err != nil {
		return raftAddr
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= busPortOffset {
		return raftAddr
	}
	return net.JoinHostPort(host, strconv.Itoa(p-busPortOffset))
}
