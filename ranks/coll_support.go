package ranks

import "fmt"

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
