package cluster

import (
	"net"
	"strconv"
)

// busToClient is the client address of a node whose Raft address is
// raftAddr, by the bus-port convention; raftAddr itself if it has no
// port above the offset.
func busToClient(raftAddr string) string {
	host, port, err := net.SplitHostPort(raftAddr)
	if err != nil {
		return raftAddr
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= RaftPortOffset {
		return raftAddr
	}
	return net.JoinHostPort(host, strconv.Itoa(p-RaftPortOffset))
}
