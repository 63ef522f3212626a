package device

import "errors"

// Kind is the frame kind carried by every inter-node frame.
type Kind uint8

const (
	KindEager   Kind = 1 // header and whole payload
	KindRTS     Kind = 2 // request to send: header, no payload; Length is the whole message
	KindCTS     Kind = 3 // clear to send: the receiver matched the RTS with sequence Seq
	KindData    Kind = 4 // rendezvous payload for the RTS with sequence Seq
	KindAck     Kind = 5 // a synchronous eager send with sequence Seq was matched
	KindControl Kind = 6 // node-to-node control payload (bootstrap, barrier, finalize, abort)
)

// Flags carried in a header.
const (
	FlagSync uint8 = 1 << 0 // synchronous send: the sender completes only when the receive is matched
)

// Header is the fixed part of every inter-node frame. Ranks are world ranks.
type Header struct {
	Kind    Kind
	Flags   uint8
	Type    uint8  // element type code of the payload (see ranks); opaque to devices
	Context uint32 // communicator context id
	Source  int32  // world rank of the sender (routing: replies such as CTS and ACK go to its node)
	Dest    int32  // world rank of the receiver (routing: the frame goes to its node and its queues)
	SrcRank int32  // the sender's rank in the communicator: the matching key the receiver sees as the source
	Tag     int32
	Length  uint64 // payload bytes: of this frame (eager, data) or of the whole message (RTS)
	Seq     uint64 // per sending node message id; CTS, DATA and ACK echo the id of the message they belong to
}

// Completer is told, once, that an operation handed to a device has finished (err nil) or failed.
type Completer interface {
	Complete(err error)
}

// Inbound is an eager message delivered to a Sink. The sink owns it until it calls Release, which returns the
// payload buffer to the device (and with it the flow-control credit the message held).
type Inbound struct {
	Header  Header
	Payload []byte
	// Release is set by the device; the sink calls it exactly once, after copying Payload out.
	Release func(*Inbound)
}

// Done returns the inbound buffer to the device that delivered it.
func (in *Inbound) Done() {
	if in.Release != nil {
		in.Release(in)
	}
}

// Device is a node's network device, shared by every rank of the node. All methods are safe for concurrent use by
// the node's rank goroutines.
type Device interface {
	// SendEager sends a message whose payload fits under the eager limit. The payload may be reused once SendEager
	// returns. done is nil for a standard send; for a synchronous send (FlagSync in h.Flags) it is completed when
	// the receiver has matched the message.
	SendEager(h *Header, payload []byte, done Completer) error
	// SendRendezvous starts a rendezvous send. The device keeps payload until it has written it to the peer, then
	// completes done. The payload must not change until then.
	SendRendezvous(h *Header, payload []byte, done Completer) error
	// ClearToSend is called by the receiving node once the RTS rts has been matched by a receive whose buffer is dst
	// (len(dst) == rts.Length). The device reads the payload straight into dst and completes done.
	ClearToSend(rts *Header, dst []byte, done Completer) error
	// Ack tells the sender of the synchronous eager message h that it was matched.
	Ack(h *Header) error
	// Control sends an opaque control payload to a node.
	Control(node int, payload []byte) error
	// EagerLimit is the largest payload SendEager accepts for dest right now; past the flow-control bound it
	// shrinks, so that senders switch to rendezvous instead of growing the receiver's unexpected buffers.
	EagerLimit(dest int) int
	// Close delivers every frame already handed to the device, then closes its connections.
	Close() error
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

// Sink is the node side of a device: where inbound traffic is delivered. Its methods are called from the device's
// progress loop, or from a rank driving it (see Poller), and must not block.
type Sink interface {
	DeliverEager(in *Inbound)
	DeliverRTS(h *Header)
	DeliverControl(node int, payload []byte)
	// PeerLost reports a node whose connection failed (the process died, or sent garbage). The node aborts the job.
	PeerLost(node int, err error)
}

// ErrClosed is returned by a device that has been closed.
var ErrClosed = errors.New("device: closed")
