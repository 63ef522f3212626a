// Package node is one gompj node process: it reads the configuration, builds the World of its ranks, starts each
// rank as a goroutine running the user's body, turns a failing rank (an error or a panic) into a job abort, and
// waits for all of them.
//
// Imports: ranks, queues, device, netdev and node/bootstrap (multi-node jobs), internal/env (the definitions of
// its variables), ants, x/sys, the standard library.
package node
