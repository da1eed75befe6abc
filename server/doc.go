// Package server runs sluice's network side: it accepts Redis protocol
// connections and serves them from a few epoll event loops (Linux), keeps
// each connection's state, hands each command to the command table (a
// command that would block runs aside, off the loop), serves the gRPC and
// HTTP front doors, and runs the background work (expiry sweep, idle
// clients, the status sampler).
package server
