//go:build !unix

package server

import "net"

// nonblocking is unavailable here: every batch goes through the writer
// goroutine.
type nonblocking struct{}

func (w *nonblocking) init(net.Conn) {}

func (w *nonblocking) ok() bool { return false }

func (w *nonblocking) writeNow([]byte) (int, error) { return 0, nil }
