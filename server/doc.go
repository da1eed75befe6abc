// Package server runs sluice's network side: it accepts Redis protocol
// connections through redcon, keeps each connection's state, reads the
// clock once per command and hands the command to the command table, and
// runs the background work (expiry sweep, metrics endpoint).
package server
