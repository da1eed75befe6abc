// Package cluster describes the topology sluice announces to cluster-aware
// clients: the node id, and (with replication) membership and the leader.
// Hash slots themselves are package slot's.
package cluster
