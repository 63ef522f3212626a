package ranks

// Check returns the error a communication call on c would return before doing anything: ErrComm for a nil or
// freed communicator, ErrAborted once the job has aborted. Collectives call it first, since their shared-memory
// paths do not go through Send and Recv.
func (c *Comm) Check() error { return c.check() }
