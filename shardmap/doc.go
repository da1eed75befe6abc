// Package shardmap is a sharded cluster's map: which group of Raft
// members owns each of the 16384 hash slots, at which epoch.
//
// A sharded sluice runs several Raft groups; each owns slot ranges and is,
// to Redis Cluster clients, one shard (its leader the master, its
// followers replicas). The map is read from a YAML file (--cluster-map):
//
//	epoch: 1
//	groups:
//	  - id: g1
//	    slots: ["0-8191"]
//	    members: {a1: "127.0.0.1:7001@127.0.0.1:17001", a2: "127.0.0.1:7002@127.0.0.1:17002"}
//	  - id: g2
//	    slots: ["8192-16383"]
//	    members: {b1: "127.0.0.1:7004@127.0.0.1:17004"}
//
// Parse validates it whole: every slot owned by exactly one group (an
// overlap or a gap is named by its ranges), group and member ids unique
// across the map, no address used twice. A map of one group owning every
// slot (OneGroup) is what --peers describes.
package shardmap
