package device

import (
	"errors"
	"sync"
	"time"

	"github.com/gompj/gompj/internal/mem"
)

// Kind is the frame kind carried by every inter-node message.
type Kind uint8

const (
	KindEager Kind = 1 // header and whole payload
	KindRTS   Kind = 2 // request to send: header, no payload; Length is the whole message
	KindCTS   Kind = 3 // clear to send: the receiver matched the RTS with sequence Seq
	KindData  Kind = 4 // rendezvous payload for the RTS with sequence Seq
	KindAck   Kind = 5 // a synchronous eager send with sequence Seq was matched
)

// Flags carried in a header.
const (
	FlagSync uint8 = 1 << 0 // synchronous send: the sender completes only when the receive is matched
)

// MaxAddress bounds the address blob a device publishes through the bootstrap (Transport.Address).
const MaxAddress = 4 << 10

// Header is the fixed part of every inter-node message. Ranks are world ranks.
type Header struct {
	Kind    Kind
	Flags   uint8
	Type    uint8  // element type code of the payload (see ranks); opaque to devices
	Context uint32 // communicator context id
	Source  int32  // world rank of the sender (routing: replies such as CTS and ACK go to its node)
	Dest    int32  // world rank of the receiver (routing: the message goes to its node and its queues)
	SrcRank int32  // the sender's rank in the communicator: the matching key the receiver sees as the source
	Tag     int32
	Length  uint64 // payload bytes: of this message (eager) or of the whole message (RTS)
	Seq     uint64 // per sending node message id; CTS, DATA and ACK echo the id of the message they belong to
}

// Completer is told, once, that an operation handed to a device has finished (err nil) or failed.
type Completer interface {
	Complete(err error)
}

// Inbound is an eager message delivered to a Sink. The sink owns it until it calls Done, which returns the
// payload buffer to the device (and with it the flow-control credit the message held).
type Inbound struct {
	Header  Header
	Payload []byte
	// Release is set by the device; the sink calls it exactly once (through Done), after copying Payload out.
	Release func(*Inbound)
}

// Done returns the inbound buffer to the device that delivered it.
func (in *Inbound) Done() {
	if in.Release != nil {
		in.Release(in)
	}
}

// Device is the data path of a node's network device, shared by every rank of the node. The rules below are what
// the rank layer relies on; the conformance suite in device/devicetest checks them for every device.
//
// # Concurrency
//
// Every method is safe for concurrent use by the node's rank goroutines, by Sink callbacks (see re-entrancy) and by
// Completers.
//
// # Order
//
// Messages with the same Source and Dest ranks are delivered in the order they were sent: if SendEager or
// SendRendezvous for message a returned before the call for message b (same Source, same Dest) began, the
// destination's Sink sees a (DeliverEager or DeliverRTS) before b, and a's callback returns before b's begins.
// This is what MPI's non-overtaking rule needs; the sink matches in delivery order. Nothing is promised between
// different (Source, Dest) pairs, nor between a message and the replies (CTS, DATA, ACK) of other messages.
//
// # Completion
//
// A method that returns an error did not start the operation: its Completer will never be called. A method that
// returns nil calls its Completer (if not nil) exactly once, with nil or with an error naming the failed peer. The
// call may happen before the method returns (SendEager completes a standard send at once), on the device's own
// goroutines, or on any goroutine driving the device (see Poller). Completers must not block.
//
// # Re-entrancy
//
// Sink callbacks and Completers may call back into the device before they return: DeliverEager calls Ack (a
// synchronous message matched at once) and Inbound.Done; DeliverRTS calls ClearToSend (a receive already posted);
// any of them may start sends. A device therefore never holds, across a callback, a lock that its own methods take.
// A callback must not call Poller.Poll (a nested Poll returns false at once).
//
// # Memory
//
// A Header passed to any method is read during the call only: a device copies what it keeps, so callers may reuse
// one header for every message. SendEager's payload may be reused as soon as SendEager returns. The payloads of
// SendRendezvous and ClearToSend belong to the device until the Completer runs: the caller keeps them referenced
// and untouched. They must be Go heap (or static) memory, never a goroutine's stack: a device may hand their addresses
// to another process (CMA) or to a NIC, which would read or write them while the owning goroutine is parked and its
// stack may move. The rank layer meets this by construction: a buffer that reaches a device through this interface
// escapes to the heap.
//
// Segmented payloads (the blocks of a strided view) go through the optional Segmented methods; a device that lacks
// them gets packed bytes from the rank layer.
type Device interface {
	// SendEager sends a message whose payload fits under EagerLimit. done is nil for a standard send; for a
	// synchronous send (FlagSync in h.Flags) it is completed when the receiver has matched the message.
	SendEager(h *Header, payload []byte, done Completer) error
	// SendRendezvous starts a rendezvous send: the destination's sink gets an RTS, and once it is matched the
	// device moves payload straight into the receiver's buffer, then completes done.
	SendRendezvous(h *Header, payload []byte, done Completer) error
	// ClearToSend is called by the receiving node once the RTS rts has been matched by a receive whose buffer is dst
	// (len(dst) <= rts.Length). The device moves the payload straight into dst and completes done. A shorter dst is
	// a truncated receive (MPI_ERR_TRUNCATE): the device moves the message's first len(dst) bytes into dst and
	// drops the rest without receiving it anywhere (the sender sends only what fits, or the receiver reads only
	// that), so that a huge message into a small buffer costs no memory of its size; both ends complete as usual.
	// The device reads rts during the call only.
	ClearToSend(rts *Header, dst []byte, done Completer) error
	// Ack tells the sender of the synchronous eager message h that it was matched.
	Ack(h *Header) error
	// EagerLimit is the largest payload SendEager accepts for dest right now; past the flow-control bound it
	// drops (to 0), so that senders switch to rendezvous instead of growing the receiver's unexpected buffers.
	// Rendezvous always makes progress, whatever the eager credit.
	EagerLimit(dest int) int
	// Close delivers every message already handed to the device, then releases its connections. Methods called
	// after Close return ErrClosed.
	Close() error
}

// Transport is a device as a node process opens it, by name, through node's registry. Open has claimed the local
// resources (a listening socket, a shared segment) and knows how it can be reached; nothing is delivered before
// Start.
//
// The life of a transport: open; Address, published to every node by the bootstrap; Start with every node's
// address and the node's Sink; WaitConnected; traffic; Close.
type Transport interface {
	Device
	// Address is this node's address blob for the device, at most MaxAddress bytes, handed to the other nodes.
	Address() []byte
	// Start connects to the nodes this transport serves and begins delivering inbound traffic to sink. addrs[n]
	// is node n's Address blob, nil for this node and for nodes served by another device. Start does not wait
	// for connections.
	Start(sink Sink, addrs [][]byte) error
	// WaitConnected waits until the transport can reach every node it serves, or fails naming those it cannot.
	WaitConnected(timeout time.Duration) error
}

// Poller is implemented by a device whose progress a waiting rank can drive itself, as FastMPJ's devices poll
// from the waiting thread: a rank that waits for something that may come from the network calls Enter, then Poll
// between checks of its completion flag, then Leave. While at least one rank is inside Enter/Leave the device's
// own progress goroutine stands down, so a node has one spinner on the network, not two fighting for a core.
//
// Poll makes whatever progress is possible without blocking (reads, deliveries to the Sink, queued writes) and
// reports whether it did any. Only one caller polls at a time; the others return false at once. Sink callbacks
// may therefore run on a polling rank's goroutine. Leave's parking argument says the caller is about to block
// (its spin window is over), so the device must resume its own progress at once; otherwise it may resume a little
// later, since the caller is likely to wait again soon.
type Poller interface {
	Enter()
	Poll() bool
	Leave(parking bool)
}

// Helper is background work that a device's progress goroutine does itself, between its rounds: the node's worker
// pool, whose tasks are the next rounds of nonblocking collectives. The completions a round delivers queue them, and
// the goroutine that delivered them, already running, takes them at once; a worker would first have to be woken, and
// then to find a processor.
//
// A progress goroutine calls Round before it handles a round of events and Help after it, outside its locks, every
// time: work queued between the two waits for Help rather than wake a worker. Help runs some of it, never blocking,
// and hands what is left to the workers; it reports whether it ran any.
type Helper interface {
	Round()
	Help() bool
}

// StandDownCheck and StandDownIdle are how long a Poller's progress loop that stood down for driving ranks waits
// before it looks again whether any still drives, when no parking rank told it to resume (StandDownFor).
//
// Each look wakes a thread, which on a box whose cores the ranks hold preempts a spinning rank, and a look that
// finds a rank between two waits polls for a while. Looking every 1 ms, a TCP ping-pong's 0-byte half round trip
// took 6.79 against 5.23 us with 10 ms (netdev, 5 interleaved pairs); over libfabric's tcp;ofi_rxm, 10 ms made it
// 0.85x and cut the context switches of a 5000-round-trip run from 11378 to 6851 (rdma, 13 pairs). Until the loop
// looks, what arrives for a rank that neither waits nor has a transfer under way (an RTS for a receive it posted
// and does not wait for yet) waits, as in MPIs that progress only inside calls.
const (
	StandDownCheck = time.Millisecond
	StandDownIdle  = 10 * time.Millisecond
)

// StandDownFor is how long a progress loop that stands down waits before it looks again: StandDownCheck while
// transfers are under way (busy: a rank that stops waiting without parking leaves them to the loop), StandDownIdle
// otherwise.
func StandDownFor(busy bool) time.Duration {
	if busy {
		return StandDownCheck
	}
	return StandDownIdle
}

// Registrar is the hook for registering memory ahead of its transfers, implemented by devices for which
// registration costs (rdma over a NIC pins pages and hands the NIC a key). Persistent requests and long-lived
// buffers register once; transfers of registered memory then skip the device's registration cache. The memory
// rules of Device apply: b must be Go heap or static memory.
type Registrar interface {
	// Register prepares b for transfers until the Registration is released. Registering the same memory twice is
	// allowed; each registration is released on its own.
	Register(b []byte) (Registration, error)
}

// Registration is memory registered with a device.
type Registration interface {
	// Release ends the registration. The memory must not be in a transfer any more.
	Release()
}

// Lender is implemented by devices that lend memory they move faster than other memory (MPI_Alloc_mem): the rdma
// device over shared memory lends a part of the node's segment, which the node processes of the host copy from
// and into directly.
type Lender interface {
	// Alloc returns n zeroed bytes of lent memory, or ErrNoLending where the device has none to lend.
	Alloc(n int) ([]byte, error)
	// Free gives back memory Alloc returned (b starting where it did) and reports true; for other memory it
	// reports false and does nothing. The memory must not be in a transfer any more.
	Free(b []byte) (bool, error)
}

// ErrNoLending is Lender.Alloc's error where a device has no memory to lend (its provider lends none).
var ErrNoLending = errors.New("device: no memory to lend")

// Describer is implemented by devices that can say how they work, for `gompj info` and the route table: "shm
// (CMA single copy)", "tcp".
type Describer interface {
	Describe() string
}

// Sink is the node side of a device: where inbound traffic is delivered. Its methods are called from the device's
// progress goroutine, or from a rank driving it (see Poller), and must not block. They may call the device back
// (see Device, re-entrancy).
type Sink interface {
	DeliverEager(in *Inbound)
	// DeliverRTS delivers a rendezvous message's RTS. h is valid during the call only (the device reuses it: a
	// header handed over behind this interface would otherwise be an allocation per message); the sink keeps a
	// copy, and passes that copy, or h during the call, to ClearToSend.
	DeliverRTS(h *Header)
	// PeerLost reports, at most once per node, a node the device can no longer reach (its process died, or it sent
	// garbage). Everything pending with that node has completed with an error. The node aborts the job.
	PeerLost(node int, err error)
}

// EagerClaimer is implemented by a Sink that can match an eager message from its header alone. A device that reads
// the header before the payload (a byte stream) offers the message to ClaimEager first: if a receive is posted that
// takes the payload as it is, the device moves the payload straight into that receive's buffer instead of into a
// buffer of its own that the sink would copy out again, one copy instead of two.
//
// ClaimEager returns the buffer, exactly h.Length bytes, and the Completer the device calls once the payload is in
// it (nil) or will never be (the peer was lost: an error), as for ClearToSend; the sink has matched the message and
// acknowledged a synchronous one. It returns ok false to have the message delivered the usual way (DeliverEager)
// once its payload is in; nothing was matched then. It is called in the message's place in the order rules (see
// Device), by whatever goroutine runs the device's progress, and may call the device back like DeliverEager. The
// buffer is a receive's: Go heap memory that stays referenced until the Completer runs.
//
// The buffer may be in pieces (a receive into a View's blocks): the device then moves the payload into them as
// they are, scattering it from where it lands (Payload.Scatter) or reading straight into large pieces. That spares
// the copy a buffer of the device's own would take before the sink scattered it.
type EagerClaimer interface {
	ClaimEager(h *Header) (dst Payload, done Completer, ok bool)
}

// ErrClosed is returned by a device that has been closed.
var ErrClosed = errors.New("device: closed")

// Pieces is a buffer made of runs of bytes scattered over memory: the blocks of a strided view, in order.
type Pieces interface {
	// Pieces fills dst with consecutive pieces of the buffer from byte off (the first may start inside a block),
	// together at most max bytes, and returns how many it filled: at least one when max > 0 and len(dst) > 0, none
	// past the buffer's end. The pieces are Go heap memory (see Device, memory).
	Pieces(off, max int, dst [][]byte) int
}

// Payload is a message's bytes in memory: Bytes, or, when Segs is set, Len bytes of Segs from its byte Off. It is
// a value, so passing one costs no allocation.
type Payload struct {
	Bytes    []byte
	Segs     Pieces
	Off, Len int
}

// Contiguous is the payload of one slice.
func Contiguous(b []byte) Payload { return Payload{Bytes: b} }

// Size is the payload's length in bytes.
func (p Payload) Size() int {
	if p.Segs != nil {
		return p.Len
	}
	return len(p.Bytes)
}

// Segmented reports whether the payload is in pieces.
func (p Payload) Segmented() bool { return p.Segs != nil }

// Packer is implemented by Pieces that copy a run of their bytes faster than piece by piece (a strided view's
// typed loops): Payload.Gather and Scatter, which devices use to stage tiny pieces, go through it. Offsets are the
// buffer's, as for Pieces.
type Packer interface {
	Gather(off int, dst []byte)
	Scatter(off int, src []byte)
}

// Gather copies bytes [off, off+len(dst)) of the payload into dst.
func (p Payload) Gather(off int, dst []byte) {
	if p.Segs == nil {
		mem.Copy(dst, p.Bytes[off:])
		return
	}
	if pk, ok := p.Segs.(Packer); ok {
		pk.Gather(p.Off+off, dst)
		return
	}
	sc := scratchPool.Get().(*[MeanSample][]byte)
	used := 0
	defer func() { putScratch(sc, used) }()
	for len(dst) > 0 {
		k := p.Segs.Pieces(p.Off+off, len(dst), sc[:])
		if k == 0 {
			return
		}
		used = max(used, k)
		for _, b := range sc[:k] {
			n := mem.Copy(dst, b)
			dst, off = dst[n:], off+n
		}
	}
}

// Scatter copies src into bytes [off, off+len(src)) of the payload.
func (p Payload) Scatter(off int, src []byte) {
	if p.Segs == nil {
		mem.Copy(p.Bytes[off:], src)
		return
	}
	if pk, ok := p.Segs.(Packer); ok {
		pk.Scatter(p.Off+off, src)
		return
	}
	sc := scratchPool.Get().(*[MeanSample][]byte)
	used := 0
	defer func() { putScratch(sc, used) }()
	for len(src) > 0 {
		k := p.Segs.Pieces(p.Off+off, len(src), sc[:])
		if k == 0 {
			return
		}
		used = max(used, k)
		for _, b := range sc[:k] {
			n := mem.Copy(b, src)
			src, off = src[n:], off+n
		}
	}
}

// MeanPiece returns the mean length of the first pieces of bytes [off, off+n) of the payload, at most sample of
// them (and at most MeanSample), and how many it looked at: fewer than sample only when those were all the pieces
// of the range. A contiguous payload is one piece. Devices judge from it whether pieces are too small to move one
// by one. It allocates nothing (see scratchPool).
func (p Payload) MeanPiece(off, n, sample int) (mean, k int) {
	if n <= 0 || sample <= 0 {
		return 0, 0
	}
	if p.Segs == nil {
		return n, 1
	}
	sc := scratchPool.Get().(*[MeanSample][]byte)
	k = p.Segs.Pieces(p.Off+off, n, sc[:min(sample, MeanSample)])
	got := 0
	for _, b := range sc[:k] {
		got += len(b)
	}
	putScratch(sc, k)
	if k == 0 {
		return 0, 0
	}
	return got / k, k
}

// MeanSample is the most pieces MeanPiece looks at.
const MeanSample = 64

// scratchPool holds the lists of pieces that MeanPiece, Gather and Scatter fill: on the stack, a list would escape
// through the Pieces call, an allocation per message.
var scratchPool = sync.Pool{New: func() any { return new([MeanSample][]byte) }}

// putScratch returns a list to the pool with its first used entries emptied (the rest are empty already): the pool
// must not keep a user's buffer alive.
func putScratch(sc *[MeanSample][]byte, used int) {
	clear(sc[:used])
	scratchPool.Put(sc)
}

// IovMax is the most pieces a device hands the kernel in one scatter-gather call (Linux's IOV_MAX).
const IovMax = 1024

// Segmented is implemented by devices that move segmented payloads without packing them: they gather the pieces
// on send and scatter into them on receive (writev and readv, a NIC's scatter-gather list, CMA's iovecs), or stage
// tiny pieces through buffers of their own where that is faster. The rules of Device hold for these methods as for
// their contiguous counterparts, which they mirror; Router implements Segmented over its devices.
type Segmented interface {
	// Segments reports whether messages to and from world rank peer can use these methods (a Router asks the
	// device serving the peer's node). For the others the rank layer packs.
	Segments(peer int) bool
	// SendEagerv is SendEager of a payload in pieces (p.Size() within EagerLimit).
	SendEagerv(h *Header, p Payload, done Completer) error
	// SendRendezvousv is SendRendezvous of a payload in pieces.
	SendRendezvousv(h *Header, p Payload, done Completer) error
	// ClearToSendv is ClearToSend into a buffer in pieces (dst.Size() <= rts.Length; shorter: truncated).
	ClearToSendv(rts *Header, dst Payload, done Completer) error
}
