// Package rdma is gompj's verbs-model device (ibvdev in Go): the eager and rendezvous protocols of device.Device
// over a Provider in the verbs model: registered memory with keys, a connectionless reliable endpoint, posted
// receives, sends, one-sided Write and Read, and a completion queue that the waiting ranks poll themselves.
//
// Providers: shm (rdma/shm: node processes on one host; lock-free rings in a shared segment and single-copy CMA,
// pure Go, Linux), ofi (rdma/ofi: libfabric FI_EP_RDM with FI_TAGGED or FI_MSG, and FI_RMA, cgo, build tag ofi:
// InfiniBand, RoCE, EFA, Slingshot, and libfabric's own tcp and shm providers) and mem (rdma/memprov: in memory,
// reordering and delaying completions, for the tests).
//
// # Messages
//
// Every message starts with a 48-byte little-endian header; RTS, CTS and DATA messages carry 24 more bytes:
//
//	offset size field
//	0      1    kind     1 eager, 2 RTS, 3 CTS, 4 DATA, 5 ACK (device.Kind); 0x20 credit, 0x22 FIN, 0x23 WDONE
//	1      1    flags    bit 0 sync (device.FlagSync); bit 1 rma (RTS, CTS: address and key below are valid);
//	                     bit 2 pieces (RTS: the sender Writes its payload, which is in pieces);
//	                     bit 3 claim (RTS with rma: offset below names the sender's claim word for a split)
//	2      1    type     element type code (opaque)
//	3      1    version  1
//	4      4    context  u32
//	8      4    source   i32 world rank of the message's sender
//	12     4    dest     i32 world rank of the message's receiver
//	16     4    tag      i32
//	20     4    srcrank  i32 the sender's rank in the communicator (the matching key)
//	24     8    length   u64: eager and DATA, bytes that follow; RTS, FIN, WDONE, the whole message; CTS, the
//	                     bytes the receiver takes (fewer than the message's into a short buffer: truncation)
//	32     8    seq      u64 the sending node's message id; replies echo it
//	40     4    credit   u32 eager credits returned to the message's receiver
//	44     4    pseq     u32 number of the message among those from its node to the receiving node
//	48     8    raddr    RTS: where the sender's payload is; CTS: where the sender writes its part
//	56     8    rkey     the registration key of raddr
//	64     8    offset   CTS: the sender writes [offset, length); DATA: where this chunk goes; RTS with the
//	                     claim flag: the token of the sender's claim word (Claimer)
//
// Source and dest are the message's ranks, also in the replies (CTS, ACK, FIN) that travel the other way;
// credit messages have source = dest = -1. Decoding checks everything before use, as netdev does: version, kind,
// flags, ranks on the right nodes, lengths against the limits and the message received, and that replies and
// DATA name a message this node waits for. A bad message fails its peer (Sink.PeerLost names it). Nothing panics.
//
// # Eager messages and credits
//
// The device posts a pool of receive buffers, registered once, each big enough for a header and an eager payload.
// Its address (published by the bootstrap) says how large an eager payload its buffers take and how many credits it
// grants each peer (from UnexpectedLimit and the number of nodes, between 8 and 256), so the two ends of a pair
// agree without exchanging anything. An eager message costs one credit, and the receiver returns it
// (in the credit field of any message, or a credit message once a quarter of the grant is owed) when the sink
// releases the message. Unexpected eager data a node holds is thus bounded by the grant. EagerLimit drops to 0 when
// no credit is left, so the rank layer sends by rendezvous; an eager send that loses the race for the last credit
// is turned into a rendezvous inside the device (its payload copied), never queued behind credits that only the
// receiver's progress can return. Control messages (RTS, CTS, DATA, FIN, WDONE, ACK, credit) need no credit: the
// receiver consumes them at once and reposts their buffers, and a reserve of posted buffers beyond the grants
// keeps room for them.
//
// # Rendezvous
//
// With RMA toward the peer, the sender registers its payload (through the registration cache) and sends an RTS
// with its address and key. Once the sink matches it, the receiver Reads the payload straight into its buffer and
// sends FIN; the sender completes on FIN. On shared memory (Caps.SplitCopy and Claimer) a large message is split
// between the CPUs of both ends, under a claim word the sender opens in its memory and names in the RTS: the
// receiver's CTS gives its own buffer's address and key, and the receiver Reads the first part at once. The
// second part is copied by whichever end takes the claim word first (one compare-and-swap in shared memory): the
// sender when it sees the CTS, Writing it and then sending WDONE, or the receiver once its own part is in, Reading
// it too. A sender that computes and polls nothing thus never holds its receiver up (before the claim word, the
// receiver waited for the sender's Write for as long as the sender computed); when both poll, each copies half.
// The sender closes the word when it completes, on the FIN, after which neither end claims it. Without RMA (CMA
// refused, GOMPJ_CMA=0), the CTS carries no address and the sender streams DATA messages through the receive
// buffers.
// A receive buffer shorter than the message (a truncated receive) takes its first bytes and nothing more: the
// receiver Reads only those, and its CTS tells a sender that Writes or streams to stop there.
//
// # Payloads in pieces
//
// The device implements device.Segmented (segments.go): a receive into a view's blocks Reads large blocks
// directly and stages small ones. A send of a view whose blocks are large, toward a peer it can Write with
// vectored Writes (shm), sends an RTS with the pieces flag: the receiver's CTS gives its whole buffer (a staging
// buffer if its own is in pieces), the sender Writes the blocks into it and sends WDONE. Other sends of a view
// are gathered into a pooled staging buffer and go as any payload.
//
// # Memory
//
// The device registers only memory it owns (the receive pool and the send bounce buffers, pinned for its life)
// and, for rendezvous, the payloads of SendRendezvous and ClearToSend, which device.Device requires to be Go heap
// or static memory held by the caller until completion. The registration cache checks this on every new buffer:
// runtime.AddCleanup refuses a pointer that is not in the heap (a goroutine stack, whose memory moves), and a
// sender's payload that is refused is copied to the heap before any address leaves the process. A cached
// registration is used only while a weak pointer to its buffer is still alive (so freed and reused memory is
// never taken for the registered one), the cleanup deregisters it once the buffer is collected, and a transfer
// pins its buffers (runtime.Pinner) until it completes. The cache is bounded in entries (Config.RegCache) and in
// registered bytes (Config.RegCacheBytes, GOMPJ_REGCACHE_BYTES): past either, the least recently used idle
// registrations are deregistered; those of transfers under way never are.
//
// # Progress
//
// A rank that waits for a remote message polls the completion queue itself (device.Poller); the device's progress
// goroutine stands down meanwhile, and otherwise polls, busy for Config.BusyPoll (SetBusyPoll) after the last
// event, then sleeps in Endpoint.Wait. Sink callbacks run on whichever goroutine polls, one at a time.
//
// Imports: gompj/device, gompj/internal/mem, gompj/internal/pool, the standard library (not ranks, queues or node).
package rdma
