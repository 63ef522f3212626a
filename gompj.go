package gompj

import (
	"os"
	"time"

	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// Config configures a job run with RunWith; zero fields take defaults (see node.Config).
type Config = node.Config

// Status describes a received or probed message: Source, Tag, and Count() elements.
type Status = ranks.Status

// Request is the handle of a nonblocking operation.
type Request = ranks.Request

// Type is a message's element type.
type Type = ranks.Type

// Wildcards and special values.
const (
	AnySource = ranks.AnySource
	AnyTag    = ranks.AnyTag
	ProcNull  = ranks.ProcNull
	Undefined = ranks.Undefined
	MaxTag    = ranks.MaxTag
)

// Error classes, for errors.Is.
var (
	ErrTruncate = ranks.ErrTruncate
	ErrType     = ranks.ErrType
	ErrRank     = ranks.ErrRank
	ErrTag      = ranks.ErrTag
	ErrAborted  = ranks.ErrAborted
	ErrComm     = ranks.ErrComm
	ErrBuffer   = ranks.ErrBuffer
	ErrArg      = ranks.ErrArg
	ErrRequest  = ranks.ErrRequest
	ErrOp       = ranks.ErrOp
	ErrRoot     = ranks.ErrRoot
	ErrInternal = ranks.ErrInternal
	ErrTopology = ranks.ErrTopology // a call needs a topology the communicator does not have, or inconsistent graph
	ErrDims     = ranks.ErrDims     // invalid grid dimensions
)

// RankError says which rank failed a job, and why (its error, or its panic and stack).
type RankError = ranks.RankError

// AbortError is the cause of a job ended by Comm.Abort; its Code is the job's exit code.
type AbortError = ranks.AbortError

// Comm is a communicator: a group of ranks and a private context for their messages.
type Comm struct {
	c *ranks.Comm
}

// rc is the communicator of the rank layer, nil for a nil *Comm: what Split with Undefined, Create and CartCreate
// give the ranks they leave out. The layers below report a nil communicator as ErrComm; reaching through c.c
// made every call on one panic instead.
func (c *Comm) rc() *ranks.Comm {
	if c == nil {
		return nil
	}
	return c.c
}

// call is rc for the entry points of the collectives and the communicator constructors, which note their call for
// the call check first (ranks.Comm.NoteCall), whatever their arguments; the collective logs it once the arguments
// pass its checks (StartCall). Members on different nodes that disagree about a root, or about which collective
// comes next, then end the job instead of hanging. It inlines: inside one node process it costs a load and a test.
func (c *Comm) call(k ranks.CallKind, root int) *ranks.Comm {
	rc := c.rc()
	if rc.Logs() {
		rc.NoteCall(k, root)
	}
	return rc
}

func wrap(c *ranks.Comm) *Comm {
	if c == nil {
		return nil
	}
	return &Comm{c}
}

// Run runs body on every rank of the job, configured from the environment (set by `gompj run`) or defaults, and
// returns once every rank has returned. The first failure (an error, a panic, an Abort) ends the job and is
// returned.
func Run(body func(c *Comm) error) error {
	cfg, err := node.FromEnv(Config{})
	if err != nil {
		return err
	}
	return RunWith(cfg, body)
}

// RunWith is Run with an explicit configuration; zero fields are filled from the environment, then defaults.
func RunWith(cfg Config, body func(c *Comm) error) error {
	cfg, err := node.FromEnv(cfg)
	if err != nil {
		return err
	}
	return node.Run(cfg, func(c *ranks.Comm) error { return body(&Comm{c}) })
}

// ExitCode is the process exit status a job's error calls for: 0 for nil, the code a rank passed to Abort, 1 for
// any other failure. A program ends with os.Exit(gompj.ExitCode(err)) so that `gompj run` reports the worst.
func ExitCode(err error) int { return node.ExitCode(err) }

var start = time.Now()

// Wtime is the wall-clock time in seconds since an arbitrary moment fixed for the process (MPI_Wtime).
func Wtime() float64 { return time.Since(start).Seconds() }

// Wtick is the resolution of Wtime in seconds (MPI_Wtick): Go's monotonic clock counts nanoseconds.
func Wtick() float64 { return 1e-9 }

// ProcessorName names the machine this rank runs on (MPI_Get_processor_name): its host name. Ranks of one node
// process, and node processes of one host, share it.
func ProcessorName() (string, error) { return os.Hostname() }

// Rank is this rank's rank in the communicator.
func (c *Comm) Rank() int { return c.rc().Rank() }

// Size is the number of ranks in the communicator.
func (c *Comm) Size() int { return c.rc().Size() }

// Send sends buf to rank dest with tag. It returns once buf may be reused.
func (c *Comm) Send(buf any, dest, tag int) error { return c.rc().Send(buf, dest, tag) }

// Ssend sends buf to dest and returns only once the matching receive has started.
func (c *Comm) Ssend(buf any, dest, tag int) error { return c.rc().Ssend(buf, dest, tag) }

// Recv receives into buf a message from source (or AnySource) with tag (or AnyTag).
func (c *Comm) Recv(buf any, source, tag int) (Status, error) { return c.rc().Recv(buf, source, tag) }

// Isend starts a send; buf must not change until the request completes.
func (c *Comm) Isend(buf any, dest, tag int) (*Request, error) { return c.rc().Isend(buf, dest, tag) }

// Issend starts a synchronous send.
func (c *Comm) Issend(buf any, dest, tag int) (*Request, error) { return c.rc().Issend(buf, dest, tag) }

// Irecv starts a receive into buf.
func (c *Comm) Irecv(buf any, source, tag int) (*Request, error) {
	return c.rc().Irecv(buf, source, tag)
}

// Sendrecv sends and receives in one call, without deadlock against a matching Sendrecv.
func (c *Comm) Sendrecv(sendBuf any, dest, sendTag int, recvBuf any, source, recvTag int) (Status, error) {
	return c.rc().Sendrecv(sendBuf, dest, sendTag, recvBuf, source, recvTag)
}

// Probe waits for a message from source with tag and returns its status without receiving it.
func (c *Comm) Probe(source, tag int) (Status, error) { return c.rc().Probe(source, tag) }

// Iprobe reports whether a message from source with tag is waiting, and its status.
func (c *Comm) Iprobe(source, tag int) (Status, bool, error) { return c.rc().Iprobe(source, tag) }

// Dup returns a communicator with the same group and a new context. Collective.
func (c *Comm) Dup() (*Comm, error) {
	d, err := c.call(ranks.CallComm, 0).Dup()
	return wrap(d), err
}

// Split partitions the communicator by color, ordering each part by key. Color Undefined returns nil, nil.
func (c *Comm) Split(color, key int) (*Comm, error) {
	s, err := c.call(ranks.CallComm, 0).Split(color, key)
	return wrap(s), err
}

// SplitNode returns the communicator of the ranks on this node (MPI_Comm_split_type, shared memory).
func (c *Comm) SplitNode() (*Comm, error) {
	s, err := c.call(ranks.CallComm, 0).SplitNode()
	return wrap(s), err
}

// Devices names the devices that carry this node process's traffic to the job's other node processes, the host's
// shared memory first: "shm" for node processes on the same host, "tcp" or "rdma" for the others (and for the same
// host's too with GOMPJ_HOST_SHM=0). It is nil in a job of one node process, whose ranks talk through its memory
// alone, and for a nil communicator. Local: other node processes may use other devices (`gompj info` shows each
// one's routes).
func (c *Comm) Devices() []string {
	if c.rc() == nil {
		return nil
	}
	return c.rc().World().Devices()
}

// Free releases the communicator.
func (c *Comm) Free() error { return c.rc().Free() }

// Abort ends the whole job with code: every rank's blocked call returns ErrAborted. It does not return.
func (c *Comm) Abort(code int) { c.rc().Abort(code) }

// SendInit creates a persistent send of buf to dest: an inactive request that each Start sends again (a slice's
// elements as they are at that Start).
func (c *Comm) SendInit(buf any, dest, tag int) (*Request, error) {
	return c.rc().SendInit(buf, dest, tag)
}

// BsendInit creates a persistent buffered send: each Start copies buf into the attached buffer and completes at
// once, as Ibsend (ErrBuffer at Start when it does not fit or no buffer is attached).
func (c *Comm) BsendInit(buf any, dest, tag int) (*Request, error) {
	return c.rc().BsendInit(buf, dest, tag)
}

// RsendInit creates a persistent ready send (sent as SendInit sends, which MPI allows).
func (c *Comm) RsendInit(buf any, dest, tag int) (*Request, error) {
	return c.rc().RsendInit(buf, dest, tag)
}

// SsendInit creates a persistent synchronous send.
func (c *Comm) SsendInit(buf any, dest, tag int) (*Request, error) {
	return c.rc().SsendInit(buf, dest, tag)
}

// RecvInit creates a persistent receive into buf: an inactive request that each Start posts again.
func (c *Comm) RecvInit(buf any, source, tag int) (*Request, error) {
	return c.rc().RecvInit(buf, source, tag)
}

// Rsend sends in ready mode: MPI lets it assume the matching receive is posted; gompj sends it as Send does.
func (c *Comm) Rsend(buf any, dest, tag int) error { return c.rc().Rsend(buf, dest, tag) }

// Irsend is the nonblocking Rsend.
func (c *Comm) Irsend(buf any, dest, tag int) (*Request, error) { return c.rc().Irsend(buf, dest, tag) }

// BsendOverhead is what each buffered message takes in the attached buffer beyond its payload.
const BsendOverhead = ranks.BsendOverhead

// Bsend copies the message into the attached buffer and returns at once, never waiting for the receiver; ErrBuffer
// when no buffer is attached or the message (plus BsendOverhead) does not fit in its free space.
func (c *Comm) Bsend(buf any, dest, tag int) error { return c.rc().Bsend(buf, dest, tag) }

// Ibsend is Bsend returning a request, already complete.
func (c *Comm) Ibsend(buf any, dest, tag int) (*Request, error) { return c.rc().Ibsend(buf, dest, tag) }

// BufferAttach gives the rank a buffer for its buffered sends (one per rank, used by every communicator).
func (c *Comm) BufferAttach(buf []byte) error { return c.rc().BufferAttach(buf) }

// BufferDetach waits until every buffered message has been delivered, then returns the buffer.
func (c *Comm) BufferDetach() ([]byte, error) { return c.rc().BufferDetach() }

// SendrecvReplace sends buf to dest and receives into buf from source, without deadlock against a matching call.
func (c *Comm) SendrecvReplace(buf any, dest, sendTag, source, recvTag int) (Status, error) {
	return c.rc().SendrecvReplace(buf, dest, sendTag, source, recvTag)
}

// Message is a message taken out of matching by Mprobe or Improbe: only its own Recv or Irecv receives it, once.
type Message = ranks.Message

// Mprobe waits for a message from source with tag and takes it out of matching, so that no other receive or
// goroutine can take it: the THREAD_MULTIPLE-safe probe. Receive it with the Message's Recv or Irecv.
func (c *Comm) Mprobe(source, tag int) (*Message, Status, error) { return c.rc().Mprobe(source, tag) }

// Improbe is Mprobe without waiting: with false, no such message is there.
func (c *Comm) Improbe(source, tag int) (*Message, Status, bool, error) {
	return c.rc().Improbe(source, tag)
}

// Startall starts persistent requests: all of them, or, if one cannot be started, none (ErrRequest).
func Startall(reqs ...*Request) error { return ranks.Startall(reqs...) }

// The completion calls. A request is active from its start until one of them reports it complete; afterwards it
// is inactive and they skip it, as they skip nil.

// Waitall waits for every active request and returns the first error.
func Waitall(reqs ...*Request) error { return ranks.Waitall(reqs...) }

// Waitany waits for one active request to complete and returns its index; with none active the index is -1.
func Waitany(reqs ...*Request) (int, Status, error) { return ranks.Waitany(reqs...) }

// Waitsome waits until at least one active request has completed and returns all that have: their indices and
// statuses. With none active it returns nil.
func Waitsome(reqs ...*Request) ([]int, []Status, error) { return ranks.Waitsome(reqs...) }

// Testall reports whether every active request has completed; only then are they all reported.
func Testall(reqs ...*Request) (bool, error) { return ranks.Testall(reqs...) }

// Testany reports one active request that has completed, without blocking: its index, status and true; with none
// active, -1 and true; with none done, -1 and false.
func Testany(reqs ...*Request) (int, Status, bool, error) { return ranks.Testany(reqs...) }

// Testsome reports every active request that has completed, without blocking: an empty list when none has, nil
// when none is active.
func Testsome(reqs ...*Request) ([]int, []Status, error) { return ranks.Testsome(reqs...) }
