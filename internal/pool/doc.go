// Package pool is a typed sync.Pool of records that are zeroed as they go back: what the devices reuse so that a
// transfer allocates nothing at steady state (netdev's and rdma's rendezvous records).
//
// Imports: the standard library only.
package pool
