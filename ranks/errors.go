package ranks

import (
	"errors"
	"fmt"
)

// The error classes of gompj. Errors returned by the library wrap one of these (test with errors.Is) and say more
// in their text.
var (
	ErrTruncate = errors.New("gompj: message truncated")
	ErrType     = errors.New("gompj: type mismatch")
	ErrRank     = errors.New("gompj: invalid rank")
	ErrTag      = errors.New("gompj: invalid tag")
	ErrAborted  = errors.New("gompj: job aborted")
	ErrComm     = errors.New("gompj: invalid communicator")
	ErrBuffer   = errors.New("gompj: invalid buffer")
	ErrArg      = errors.New("gompj: invalid argument")
	ErrRequest  = errors.New("gompj: invalid request")
	ErrOp       = errors.New("gompj: invalid reduction operation")
	ErrRoot     = errors.New("gompj: invalid root")
	ErrGroup    = errors.New("gompj: invalid group")
	ErrInternal = errors.New("gompj: internal error")
	ErrTopology = errors.New("gompj: invalid topology")
	ErrDims     = errors.New("gompj: invalid dimensions")
)

// AbortError is the cause carried by ErrAborted when a rank called Comm.Abort.
type AbortError struct {
	Rank int // world rank that called Abort
	Code int
}

func (e *AbortError) Error() string { return fmt.Sprintf("rank %d called Abort(%d)", e.Rank, e.Code) }

// RankError says which rank failed a job and why: the error its body returned, or its panic and stack.
type RankError struct {
	Rank  int
	Err   error
	Panic any    // non-nil when the rank panicked
	Stack []byte // the panicking goroutine's stack
}

func (e *RankError) Error() string {
	if e.Panic != nil {
		return fmt.Sprintf("rank %d panicked: %v\n%s", e.Rank, e.Panic, e.Stack)
	}
	return fmt.Sprintf("rank %d failed: %v", e.Rank, e.Err)
}

func (e *RankError) Unwrap() error { return e.Err }

func errRank(r, size int) error {
	return fmt.Errorf("%w: rank %d, communicator size %d", ErrRank, r, size)
}

func errTag(t int) error {
	return fmt.Errorf("%w: %d (tags are 0..%d, AnyTag on receives)", ErrTag, t, MaxTag)
}
