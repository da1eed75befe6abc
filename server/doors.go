package server

import (
	"fmt"
	"net"
)

// A member whose gRPC or HTTP door could not bind used to find out after
// it had joined its Raft group: it took part in elections and then exited
// (a port taken by another process, or by an outgoing connection when the
// door sits in the ephemeral range). New binds the doors first.

// bindDoors binds the gRPC and HTTP doors' sockets the config names.
func (s *Server) bindDoors() error {
	for _, d := range []struct {
		raw  *net.Listener
		addr string
		name string
	}{{&s.grpcRaw, s.cfg.GRPCAddr, "grpc"}, {&s.httpRaw, s.cfg.HTTPAddr, "http"}} {
		if d.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", d.addr)
		if err != nil {
			s.unbindDoors()
			return fmt.Errorf("server: listen %s: %w", d.name, err)
		}
		*d.raw = ln
	}
	return nil
}

// unbindDoors closes the doors' sockets not yet served (New failed).
func (s *Server) unbindDoors() {
	for _, raw := range []*net.Listener{&s.grpcRaw, &s.httpRaw} {
		if *raw != nil {
			_ = (*raw).Close()
			*raw = nil
		}
	}
}

// doorSocket is the socket New bound for a door (handed over: the door
// owns it from here), or a new one at addr.
func (s *Server) doorSocket(raw *net.Listener, addr, name string) (net.Listener, error) {
	if ln := *raw; ln != nil {
		*raw = nil
		return ln, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("server: listen %s: %w", name, err)
	}
	return ln, nil
}
