package rdma

import (
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// Provider is a fabric the rdma device runs over, in the verbs model: shm (node processes on one host, pure Go),
// ofi (libfabric's FI_EP_RDM endpoints, cgo, build tag ofi) and the in-memory provider of the tests (rdma/memprov).
type Provider interface {
	// Name is the provider's name: "shm", "ofi", "mem".
	Name() string
	// Open opens this node's endpoint. Nothing is connected yet.
	Open(cfg EndpointConfig) (Endpoint, error)
}

// EndpointConfig is what a provider needs to open a node's endpoint.
type EndpointConfig struct {
	Node, Nodes int
	// Secret is the job secret. A provider that connects out of band (shm's Unix sockets) proves it on every
	// connection; a fabric provider may ignore it.
	Secret []byte
}

// Caps says what an endpoint can do; the device adapts its protocol to it.
type Caps struct {
	// MaxMsg is the largest message Send or Inject carries (FI: ep_attr->max_msg_size, bounded by the buffers
	// the device posts).
	MaxMsg int
	// InjectSize is the largest message Inject takes (FI: tx_attr->inject_size); 0 if there is no Inject.
	InjectSize int
	// RecvDepth is how many receives may be posted at once (FI: rx_attr->size); 0 for no limit.
	RecvDepth int
	// Ordered: messages from one endpoint to another complete at the receiver in the order they were sent
	// (FI_ORDER_SAS). Without it the device numbers the messages of each pair and restores their order.
	Ordered bool
	// RMA: Write and Read exist (FI_RMA). PeerRMA may still refuse them toward a peer.
	RMA bool
	// MaxRMA is the largest single Write or Read (0: no limit); longer transfers are split.
	MaxRMA int
	// VirtAddr: a remote address is the virtual address in the peer (FI_MR_VIRT_ADDR); otherwise it is an offset
	// into the peer's registered region. MR.Addr hides the difference.
	VirtAddr bool
	// LocalMR: local buffers of PostRecv, Send, Write and Read must be registered and passed with their MR
	// (FI_MR_LOCAL); otherwise the MR argument may be nil.
	LocalMR bool
	// RegisterCost: registration pins pages and talks to a NIC, so the device caches registrations (a pin-down
	// cache) rather than registering each transfer's buffer.
	RegisterCost bool
	// SplitCopy: the CPUs of the two ends do the copies (shm), so a large rendezvous is split and each end moves
	// half of it at once; on a NIC, one Read at line rate is better.
	SplitCopy bool
	// EagerLimit is the eager/rendezvous switch the provider suggests (0: the device's default).
	EagerLimit int
}

// Access says what a registration allows.
type Access uint8

const (
	AccessLocal       Access = 1 << iota // local Send, PostRecv, and the local side of Write and Read
	AccessRemoteRead                     // peers may Read it (FI_REMOTE_READ)
	AccessRemoteWrite                    // peers may Write it (FI_REMOTE_WRITE)
)

// MR is a memory registration (FI: struct fid_mr).
type MR interface {
	// Key is the remote key peers name the region with (FI: fi_mr_key).
	Key() uint64
	// Desc is the local descriptor passed with local buffers when Caps.LocalMR (FI: fi_mr_desc); may be nil.
	Desc() unsafe.Pointer
	// Addr is how a peer names p, an address inside the region, in Write and Read: p itself (Caps.VirtAddr) or its
	// offset from the start of the region.
	Addr(p unsafe.Pointer) uint64
	// Close ends the registration (FI: fi_close). The memory must not be in a transfer any more.
	Close() error
}

// Op is the kind of a completion.
type Op uint8

const (
	OpSend       Op = iota + 1 // a Send finished: its buffer may be reused
	OpRecv                     // a posted receive holds a message: Node sent it, Len bytes
	OpWrite                    // a Write finished: the data is in the target's memory (FI_DELIVERY_COMPLETE)
	OpRead                     // a Read finished: the data is in the local buffer
	OpPeerLost                 // Node is gone without closing (its process died, its memory is corrupt): Err says why
	OpPeerClosed               // Node closed its endpoint cleanly: it will send nothing more
)

func (o Op) String() string {
	switch o {
	case OpSend:
		return "send"
	case OpRecv:
		return "recv"
	case OpWrite:
		return "write"
	case OpRead:
		return "read"
	case OpPeerLost:
		return "peer-lost"
	case OpPeerClosed:
		return "peer-closed"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Completion is one entry of an endpoint's completion queue (FI: fi_cq_readfrom and fi_cq_readerr).
type Completion struct {
	Op   Op
	Ctx  uint64 // the ctx of the operation (OpSend, OpRecv, OpWrite, OpRead)
	Node int    // the peer: the sender (OpRecv, FI_SOURCE), the target, or the node lost or closed
	Len  int    // OpRecv: bytes received
	Err  error  // the operation failed (an error naming the peer and the call); for OpPeerLost, why
}

// Endpoint is one node's endpoint: connectionless and reliable (FI_EP_RDM), shared by the device's goroutines.
// Every method is safe for concurrent use, with Close too, except Poll and Wait: they have one caller at a time
// (the device's poller) and are never called once Close has begun.
//
// Operations that move data take a ctx, reported by their completion; Send, Write and Read own their local
// buffer until then. A method that returns an error did not start the operation (and produces no completion):
// ErrAgain means the provider's queues are full for now (FI_EAGAIN) and the call may be retried after Poll;
// any other error is final. Errors name the peer and the call.
type Endpoint interface {
	Caps() Caps
	// Address is the endpoint's address blob for the bootstrap (FI: fi_getname), at most 4 KiB.
	Address() []byte
	// Connect makes node's endpoint, whose Address is addr, reachable (FI: fi_av_insert). It need not wait for
	// the peer; Ready does.
	Connect(node int, addr []byte) error
	// Ready waits until every connected node is reachable, or fails naming those that are not.
	Ready(timeout time.Duration) error
	// PeerRMA reports whether Write and Read work toward node (shm: CMA may be refused by the kernel).
	PeerRMA(node int) bool
	// Register registers b (FI: fi_mr_reg). b must be Go heap or static memory, referenced by the caller for as
	// long as the registration lives (the device's registration cache checks both), or memory the endpoint lent
	// (Lender).
	Register(b []byte, acc Access) (MR, error)
	// PostRecv posts b to receive one message from any node (FI: fi_recv with FI_ADDR_UNSPEC). A message that
	// arrives while no receive is posted waits in the provider (FI_RM_ENABLED); it is never dropped.
	PostRecv(b []byte, mr MR, ctx uint64) error
	// Send sends b to node (FI: fi_send); OpSend completes it.
	Send(node int, b []byte, mr MR, ctx uint64) error
	// Inject sends hdr followed by payload to node, copied before it returns, with no completion (FI: fi_inject;
	// len(hdr)+len(payload) <= Caps.InjectSize).
	Inject(node int, hdr, payload []byte) error
	// Write copies local into node's registered memory at raddr (named by MR.Addr there) under rkey (FI: fi_write
	// with FI_DELIVERY_COMPLETE); OpWrite completes it once the data is in the target's memory.
	Write(node int, local []byte, mr MR, raddr, rkey uint64, ctx uint64) error
	// Read copies node's registered memory at raddr under rkey into local (FI: fi_read); OpRead completes it.
	Read(node int, local []byte, mr MR, raddr, rkey uint64, ctx uint64) error
	// Poll moves up to len(cs) completions into cs and returns how many (FI: fi_cq_read). An error means the
	// endpoint itself failed.
	Poll(cs []Completion) (int, error)
	// Wait blocks until Poll may find something, Wake is called, or timeout passes (FI: fi_cq_sread). It is for the
	// device's progress goroutine when no rank polls.
	Wait(timeout time.Duration)
	// Wake ends a Wait at once, or the next one if none is under way (FI: fi_cq_signal).
	Wake()
	// Close says goodbye to every peer (they see OpPeerClosed, not OpPeerLost) and releases the endpoint.
	Close() error
}

// VectorRMA is implemented by endpoints that Read into and Write from several local buffers in one operation and
// copy before they return (shm: the local iovecs of process_vm_readv and process_vm_writev). The device uses it,
// on endpoints that need no local registrations (Caps.LocalMR false), to move a message straight between the
// blocks of a view and a peer's buffer with few operations; since nothing keeps the locals past the call, it
// does not pin them (pinning each of thousands of blocks costs more than copying them).
type VectorRMA interface {
	// Readv is Read into locals, in order, from node's memory at raddr (their lengths summed, within Caps.MaxRMA;
	// at most device.IovMax locals): one operation, completed by one OpRead. The locals are written before Readv
	// returns, or not at all.
	Readv(node int, locals [][]byte, raddr, rkey uint64, ctx uint64) error
	// Writev is Write from locals, in order, to node's memory at raddr, with Readv's rules, completed by one
	// OpWrite. The locals are read before Writev returns.
	Writev(node int, locals [][]byte, raddr, rkey uint64, ctx uint64) error
}

// InPlacer is implemented by endpoints whose incoming messages lie in memory the device may read where they are
// (shm: the peers' rings). Poll then offers each message to the device's callback before it copies it into a
// posted receive: a message the callback takes costs no receive buffer and no copy into one. The callback sees a
// message only after every earlier one from the same node was taken by it or completed by Poll, so the order of
// each node's messages holds.
type InPlacer interface {
	// OfferInPlace installs take, once, before the first Poll. Poll calls take(node, m) by the polling goroutine,
	// with m valid only until take returns (a peer may scribble on it meanwhile: take reads what it keeps once, and
	// checks it); take reports whether it took the message. One that it does not take is received as usual, and
	// so is every later one from node in the same Poll.
	OfferInPlace(take func(node int, m []byte) bool)
}

// Lender is implemented by endpoints that lend memory which peers reach more cheaply than other memory (shm: a
// part of the node's segment, which the node processes of the host map, so that a Read or Write of it is a copy
// between mappings rather than a CMA system call). A Lender notes what it lends (NoteLent), so that every device
// of the process registers it: it never moves and stays mapped until Free.
type Lender interface {
	// Alloc returns n zeroed bytes of lent memory.
	Alloc(n int) ([]byte, error)
	// Free gives back memory Alloc returned (b starting where it did) and reports true; for other memory it
	// reports false and does nothing. Lent memory must not be in a transfer when it is freed.
	Free(b []byte) (bool, error)
}

// LentRMA is implemented by endpoints whose Read and Write of memory a peer lent (NoteLent) work even where
// PeerRMA does not (shm: a copy between mappings of the peer's segment needs no CMA). The device then moves lent
// memory by Read and Write toward such a peer, and streams the rest.
type LentRMA interface {
	LentRMA(node int) bool
}

// Claimer is implemented by endpoints whose nodes share memory (shm), so that the two ends of a rendezvous can
// settle with one atomic operation, and no message, which of them copies a part of it. The device splits a large
// rendezvous between both ends' CPUs (Caps.SplitCopy) only under a claim word the sender opens: the receiver
// Reads the first part at once, and the second part is copied by whichever end claims it first: the sender on
// the CTS (a Write), or the receiver once its own part is in (a Read). A sender that is busy computing and does
// not poll then never holds its receiver up.
type Claimer interface {
	// OpenClaim opens a claim word in this node's memory and returns the token that names it to peers; ok is
	// false when every word is in use (the device then does not split).
	OpenClaim() (token uint64, ok bool)
	// Claim takes the claim word token of node, this node's own or a peer's, and reports whether this call took
	// it (nobody had). A token that names no word is an error.
	Claim(node int, token uint64) (bool, error)
	// CloseClaim gives an opened word back, once neither end will claim it again.
	CloseClaim(token uint64)
}

// ErrAgain is returned by an Endpoint whose queues are full for now (FI_EAGAIN): poll, then try again.
var ErrAgain = errors.New("rdma: provider busy (try again)")

// OpError is an endpoint call that failed: which call, toward which node, and why.
type OpError struct {
	Call string // "fi_write", "process_vm_readv", ...
	Node int    // the peer, or -1
	Err  error
}

func (e *OpError) Error() string {
	if e.Node < 0 {
		return fmt.Sprintf("rdma: %s: %v", e.Call, e.Err)
	}
	return fmt.Sprintf("rdma: %s toward node %d: %v", e.Call, e.Node, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }
