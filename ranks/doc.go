// Package ranks is the rank layer of gompj: communicators (Comm), point-to-point messaging, requests and statuses.
//
// A World is one node process's share of a job: its local ranks, each with its posted and unexpected queues, and
// the node's network device for ranks elsewhere. A send to a rank on this node locks that rank's queues and either
// copies straight into a posted receive, or leaves an eager copy (small messages) or a reference to the sender's
// slice (rendezvous: the receiver copies, then the send completes). Eager copies waiting at a rank are bounded by
// its share of the node's limit: past it, eager sends to that rank go rendezvous (see Rank.reserve). A send to a
// rank on another node goes to the device, which delivers into the destination rank's queues through World's Sink
// methods: the same matching, so AnySource covers local and remote senders alike.
//
// Buffers are slices of primitive types, moved as memory, or any other value, msgpack-encoded. Every message
// carries its element type; a mismatch is ErrType and a short buffer ErrTruncate, with what fits delivered.
//
// Imports: queues, device, msgpack, the standard library. Nothing above it (collectives, nbc, node, root).
package ranks
