// Package bootstrap brings the node processes of a multi-node gompj job together through a coordinator.
//
// A coordinator (run by node 0 in-process, or standalone) listens on an address. Every node Joins it: it proves the
// job secret (package netdev/auth, purpose "bootstrap", mutual HMAC-SHA256 challenge-response with a deadline),
// registers its node id and its endpoint (its host identity and one address blob per device it opened) and, once all
// N nodes have registered, receives the table of every node's endpoint. The connection stays open for the whole job
// and carries:
//
//   - Barrier(name): a round trip through the coordinator that returns once every node entered the barrier
//     (before the body runs, and at finalize);
//   - aborts: a node can Abort(code, reason) and every other node is told; if a node's connection drops without a
//     Leave (the process died), the coordinator tells every other node that the node was lost. Nodes see both
//     through OnAbort, and blocked Barriers return an *AbortError;
//   - the registration timeout: if some node never registers within Timeout, every registered node gets an error
//     naming the missing node ids, and the coordinator's Wait returns it.
//
// Messages are msgpack maps behind a 4-byte little-endian length, at most 16 MiB; every decoded message is checked
// (known kind, node ids in range, bounded strings and blobs, a table of exactly N endpoints) before it is used.
//
// Imports: gompj/netdev/auth, github.com/vmihailenco/msgpack/v5 and the standard library.
package bootstrap
