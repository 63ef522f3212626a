package ranks

import (
	"fmt"

	"github.com/gompj/gompj/queues"
)

// Check returns the error a communication call on c would return before doing anything: ErrComm for a nil or
// freed communicator, ErrAborted once the job has aborted. Collectives call it first, since their shared-memory
// paths do not go through Send and Recv.
func (c *Comm) Check() error { return c.check() }

// IsendMem is Isend of a buffer already seen as memory (a primitive buffer from MemOf), given as itself rather than
// boxed in an interface. With IrecvMem it lets the collectives send typed blocks, so that a receiver of another
// element type gets ErrType, without allocating per message.
func (c *Comm) IsendMem(m Mem, dest, tag int) (*Request, error) {
	if err := c.checkSendMem(m, dest, tag); err != nil {
		return nil, err
	}
	if dest == ProcNull {
		return c.r.completed(kindSend).handle(), nil
	}
	req, err := c.startSendMem(m, nil, dest, tag, standard, false, nil)
	if err != nil {
		return nil, err
	}
	if req == nil {
		return c.r.completed(kindSend).handle(), nil
	}
	return req.handle(), nil
}

// IrecvMem is Irecv into a buffer already seen as memory (see IsendMem).
func (c *Comm) IrecvMem(m Mem, source, tag int) (*Request, error) {
	if err := c.checkRecvMem(m, source, tag); err != nil {
		return nil, err
	}
	return c.irecv(m, nil, source, tag).handle(), nil
}

// checkSendMem checks a send of memory m to dest (IsendMem, SendInitMem): the communicator, dest and tag, and m.
func (c *Comm) checkSendMem(m Mem, dest, tag int) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := c.checkDest(dest, tag); err != nil {
		return err
	}
	return checkMem(m, false)
}

// checkRecvMem checks a receive into memory m from source (IrecvMem, RecvInitMem).
func (c *Comm) checkRecvMem(m Mem, source, tag int) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := c.checkSource(source, tag); err != nil {
		return err
	}
	return checkMem(m, true)
}

// checkMem refuses what MemOf let through but no call may use: a nil *View (Type none), and, to receive into,
// a View whose blocks overlap (MPI: erroneous; here the message would land in an order-dependent mix).
func checkMem(m Mem, recv bool) error {
	if !m.Type.Valid() || m.Type == TypeObject || m.N < 0 {
		if m.Type == TypeNone && m.view == nil && m.Ptr == nil && m.N == 0 {
			return fmt.Errorf("%w: a nil *View", ErrBuffer)
		}
		return fmt.Errorf("%w: memory of %s, %d elements", ErrBuffer, m.Type, m.N)
	}
	if recv && m.view != nil && m.view.overlap {
		return fmt.Errorf("%w: receiving into %v, whose blocks overlap", ErrBuffer, m.view)
	}
	return nil
}

// Child is a send or a receive that an operation posted for one step of its schedule (package nbc's transport): a
// request that no completion call sees, as a blocking call's, which the operation collects once its flag is set
// (Collect); its state then goes back to its rank's pool. Children are what every small nonblocking collective
// between node processes is made of: a one-shot Isend or Irecv in their place took a state from the pool under a new
// generation and a handle from the rank's block, and since the operation armed its hook on the flag, the state was
// never reused (a watched flag: Request.reuse), so every step allocated 256 bytes of fresh, cold memory. The zero
// Child is a send that completed at its start (an eager one): there is nothing to wait for or collect.
type Child struct{ r *request }

// SendChild starts a send of memory m to dest with tag, for an operation's step (see Child).
func (c *Comm) SendChild(m Mem, dest, tag int) (Child, error) {
	if err := c.checkSendMem(m, dest, tag); err != nil {
		return Child{}, err
	}
	if dest == ProcNull {
		return Child{}, nil
	}
	r, err := c.startSendMem(m, nil, dest, tag, standard, true, nil)
	return Child{r}, err
}

// RecvChild starts a receive into memory m from source with tag, for an operation's step (see Child).
func (c *Comm) RecvChild(m Mem, source, tag int) (Child, error) {
	if err := c.checkRecvMem(m, source, tag); err != nil {
		return Child{}, err
	}
	rr := c.r.getReq(kindRecv)
	if source == ProcNull {
		rr.finished = true
		rr.done.Complete()
		return Child{rr}, nil
	}
	rr.setMem(m)
	c.postRecv(rr, source, tag)
	return Child{rr}, nil
}

// CollChild returns the request of a small collective that an operation runs as one of its phases (package nbc's
// node-aware operations: a phase within the node, completed by whichever member finishes it, through Target).
func (c *Comm) CollChild() Child {
	if c.r == nil {
		return Child{&request{w: c.w, kind: kindColl}}
	}
	return Child{c.r.getReq(kindColl)}
}

// Target returns what completes k (see Target).
func (k Child) Target() Target { return Target(k) }

// Flag returns k's completion flag, or nil if k completed at its start (the zero Child).
func (k Child) Flag() *queues.Completion {
	if k.r == nil {
		return nil
	}
	return &k.r.done
}

// Err returns the error k completed with; its flag must be set. Unlike Collect it leaves k as it is: a hook armed
// on the flag (queues.Completion.OnComplete) may read it on the completing goroutine, and the operation collects k
// later on its own.
func (k Child) Err() error {
	if k.r == nil {
		return nil
	}
	return k.r.err
}

// Collect returns the outcome of k, whose flag is set, and recycles its state: k must not be used again. A state
// still tied to something (a message held for decoding, a View's scratch) is left to the garbage collector.
func (k Child) Collect() error {
	r := k.r
	if r == nil {
		return nil
	}
	err := r.err
	if r.reusable() {
		// The buffer goes with it: a pooled state may wait long for its next use, and must not keep the program's
		// buffer alive meanwhile (a blocking call's goes back with it, and is taken again by the rank's next call).
		r.vptr = nil
		r.owner.putReq(r)
	}
	return err
}

// BytesMem returns the memory of byte slice b.
func BytesMem(b []byte) Mem { return sliceMem(TypeByte, b) }
