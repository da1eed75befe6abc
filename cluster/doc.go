// Package cluster maps keys to Redis Cluster hash slots and describes the
// topology sluice announces to cluster-aware clients.
//
// Slots are computed exactly as Redis Cluster does (CRC16-XMODEM of the key,
// or of its first non-empty {hash tag}, modulo 16384), so keys that share a
// tag share a slot on sluice and on Redis alike, and can be checked together
// atomically.
package cluster
