// Package node is one gompj node process: it reads the configuration, builds the World of its ranks, starts each
// rank as a goroutine running the user's body, turns a failing rank (an error or a panic) into a job abort, and
// waits for all of them.
//
// In a multi-node job it also opens the devices by name through a small registry (devices.go; the files that
// register tcp, shm and rdma are chosen by build tags), publishes each one's address blob and this host's
// identity through the bootstrap, routes every peer node to one device (same host: shared memory unless
// GOMPJ_HOST_SHM=0; other hosts: GOMPJ_DEV), and starts the devices with the World as their sink.
//
// Imports: ranks, queues, device, the devices (netdev, rdma) and node/bootstrap, internal/env (the definitions of
// its variables), internal/cpus, ants, x/sys, the standard library.
package node
