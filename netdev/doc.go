// Package netdev is gompj's TCP network device: one per node process, shared by all of the node's ranks, carrying
// the inter-node messages of the peers it serves (node processes on other hosts, or every peer with
// GOMPJ_HOST_SHM=0), keyed by destination world rank. It implements device.Transport (Open listens and gives the
// Address, host:port; Start takes the other nodes' addresses and the Sink) and device.Poller.
//
// # Progress
//
// One progress-loop goroutine per device owns an epoll set (golang.org/x/sys/unix) holding every connection's
// non-blocking socket, edge-triggered, plus an eventfd for tasks posted by other goroutines. After the last event
// the loop keeps polling with a zero timeout for Config.BusyPoll (default 50µs, negative disables; SetBusyPoll
// changes it, as node does where the host's ranks outnumber its cores) before it sleeps in epoll_wait, which keeps
// the half round trip short. There is no goroutine per connection; the only other
// goroutines are the accept loop and short-lived dial/handshake goroutines.
//
// One goroutine at a time writes to a connection's socket: the holder of its write turn. A sending rank that finds
// the connection idle takes the turn and writes its frame (header and payload gathered by one writev, no copy)
// straight to the socket, without holding the connection's mutex during the system call; a rank that finds the
// turn taken, or frames queued, copies its frame to the connection's queue, where small frames are packed into
// 64 KiB buffers, and returns at once. Before giving the turn back its holder writes out what was queued
// meanwhile, many frames per writev, so frames that arrive while the socket is busy are coalesced and the kernel
// never sees two writers on one socket; what the socket does not take waits for the loop, on EPOLLOUT. A flush
// asked for while the turn is taken is recorded for its holder, so no wake-up is lost. Rendezvous payloads are
// streamed from the sender's slice in DATA frames of at most Config.ChunkSize (1 MiB); after each chunk the
// stream goes to the back of the queue so that other traffic interleaves.
//
// Segmented payloads (device.Segmented, a strided view's blocks; segments.go) go out with writev, at most
// device.IovMax pieces a call, and DATA is read straight into the receiver's pieces with readv; pieces averaging
// under 512 bytes are packed through a staging buffer just before each write, and scattered from the read buffer.
//
// # Frames
//
// Every frame is a 48-byte little-endian header followed by payloadLen bytes:
//
//	offset size field
//	0      1    kind     1 eager, 2 RTS, 3 CTS, 4 DATA, 5 ACK (device.Kind); 0x20 credit, 0x21 goodbye
//	1      1    flags    bit 0 = device.FlagSync; other bits must be 0
//	2      1    type     element type code (opaque)
//	3      1    version  1
//	4      4    context  u32 communicator context
//	8      4    source   i32 world rank of the sender of the message
//	12     4    dest     i32 world rank of the receiver of the message
//	16     4    tag      i32
//	20     4    credit   u32 receive credit returned to the frame's receiver (see Flow control)
//	24     8    length   u64: payload bytes of an eager or DATA frame; RTS: the whole message; CTS: the bytes the
//	                     receiver takes, the whole message or, into a shorter buffer (truncation), its first bytes
//	32     8    seq      u64 the sending node's message id; CTS, DATA and ACK echo the id of their message
//	40     4    srcrank  i32 the sender's rank in the communicator (the matching key); 0 on node-level frames
//	44     4    reserved must be 0
//
// payloadLen is length for eager and DATA frames and 0 for the others. Source and dest are always the message's
// ranks, also in the replies (CTS, ACK) that travel the other way. Node-level frames (credit, goodbye) have
// source = dest = -1 and type, flags, context, tag, seq, srcrank and length zero.
//
// Decoding validates everything before any payload byte is read: version, kind, flags; ranks in [0, Ranks); for
// eager, RTS and DATA the source rank lives on the peer and the dest rank on this node, the other way round for CTS
// and ACK; lengths under the limits (eager limit, chunk size, Config.MaxMessage); CTS, ACK and
// DATA must name a message this node is waiting on with the same ranks, context and tag, and DATA must not overrun
// it. A bad frame fails the connection's peer: its sockets are closed, everything pending on it completes with a
// *PeerError wrapping ErrPeerLost, and Sink.PeerLost names the node. Nothing panics.
//
// # Protocols
//
//   - eager: SendEager writes header and payload. The receiver first offers the header to the sink, if it is a
//     device.EagerClaimer (the rank layer is): when a receive is already posted for the message, the sink matches
//     it there and then, and the payload is read straight into that receive's buffer (one copy out of the read
//     buffer, or none for a remainder of 16 KiB and more, read from the socket in place), which then completes.
//     Otherwise the receiver reads the payload into a pooled buffer (power-of-two size classes, recycled with their
//     device.Inbound, so the steady state allocates nothing) and hands the Inbound to Sink.DeliverEager. Either
//     way the message's credit returns once the payload has left the device's hands. FlagSync sends keep their
//     Completer by seq until the ACK (Device.Ack) arrives.
//   - rendezvous: SendRendezvous sends an RTS (length = message size) and keeps payload and Completer by seq.
//     The receiving sink calls ClearToSend with its own slice: the device records it by (peer, seq) and sends a CTS;
//     the sender streams DATA frames from its slice and completes once the last byte is in the kernel; the receiver
//     reads DATA straight into the slice (payload remainders of 16 KiB and more bypass the read buffer entirely) and
//     completes when all bytes arrived. Rendezvous needs no credit, so it always makes progress.
//
// # Flow control
//
// Each node grants every peer Config.UnexpectedLimit/(nodes-1) bytes of receive credit (the same on every node, so
// no grant is exchanged). An eager message costs its payload plus 64 bytes. The sender subtracts the cost when it
// sends; EagerLimit(dest) returns 0 once the credit left toward dest's node is below the eager limit plus 64, which
// tells the rank layer to use rendezvous (even for empty messages). The receiver adds the cost to what it owes the
// peer when the sink releases the Inbound; owed credit rides in the credit field of the next frame to that peer,
// or, once it reaches a quarter of the grant, in a credit frame of its own. Senders that saw a positive EagerLimit
// at once may overdraw the credit, by at most (ranks of the sending node - 1) × (eager limit + 64): a send that
// would go further (more concurrent senders than the node has ranks, or a caller that did not ask EagerLimit) goes
// by rendezvous instead, from a copy. Unexpected eager bytes held per peer are thus bounded by the grant plus that
// overdraft, and the receiver enforces it: it counts the cost of every eager frame from a peer at its header until
// the message is released, and an eager frame that would take the count past the bound fails the peer as a bad
// frame before any buffer is taken for it. (The grant is capped at 256 TiB so that none of this overflows.)
//
// # Connections and security
//
// Config.Stripes connections join each pair of nodes (default 1); a message goes on the stripe chosen by hashing
// (source rank, dest rank), so each pair's messages stay in order (credit frames use stripe 0). Node i
// dials nodes j < i; with Config.Lazy a node instead dials a stripe the first time it has a frame for it, and if
// both ends dial at once each keeps writing on the connection it got first and only reads the other. Every
// connection proves the job secret in both directions (package auth, HMAC-SHA256 challenge-response with a
// deadline) before a single frame is read; a stranger gets a random challenge and a closed socket. The listener
// binds to the configured address only.
//
// Every connection has Nagle off. Config.Congestion picks its congestion control (sys.go, congestionFor): by
// default Reno on a connection within one host, where the kernel's default here (BBR) paced a 1 MiB message to
// 1.7 times Reno's time, and the kernel's default between hosts.
//
// # Close and peer loss
//
// Close stops new sends, waits (up to CloseTimeout) until the queues are flushed and no rendezvous is in flight
// either way, sends a goodbye frame on every connection and closes each once the peer's goodbye came back (a peer
// answers a goodbye with its own after flushing). A connection that ends without a goodbye (EOF, reset, EPOLLHUP:
// the process died) fails its peer at once and Sink.PeerLost is called exactly once for that node.
//
// # Linux only
//
// The device is built on epoll, eventfd and raw socket descriptors, so every file but this one is built on Linux
// alone; elsewhere the package is empty, and node says at the start of a multi-node job that the network device
// needs Linux (single-box jobs need no device and run everywhere).
//
// Imports: gompj/device, gompj/internal/pool, gompj/netdev/auth, golang.org/x/sys/unix and the standard library (not
// queues or ranks).
package netdev
