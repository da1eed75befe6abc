// Package slot maps keys to Redis Cluster hash slots.
//
// Slots are computed exactly as Redis Cluster does (CRC16-XMODEM of the key,
// or of its first non-empty {hash tag}, modulo 16384), so keys that share a
// tag share a slot on sluice and on Redis alike, and can be checked together
// atomically. It is a leaf package: the keyspace, the state machine and the
// cluster layer all import it, and it imports nothing of sluice's.
package slot
