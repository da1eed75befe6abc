//go:build !linux

package server

import (
	"errors"
	"net"
)

// Client connections are served from epoll event loops (loop_linux.go);
// elsewhere the server builds, for the packages and tools around it, but
// does not serve.

type eventLoop struct{}

type fdConn struct{}

func (s *Server) startLoops() error {
	return errors.New("sluice serves clients on Linux only (its event loops use epoll)")
}

func (s *Server) stopLoops() {}

func (s *Server) admit(nc net.Conn, _ *eventLoop) { nc.Close(); s.conns.Done() }

func (s *Server) closeIdle() {}
