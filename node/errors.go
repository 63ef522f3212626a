package node

import (
	"errors"
	"fmt"

	"github.com/gompj/gompj/ranks"
)

// ErrNodeLost is wrapped by a *RemoteError about a node process that died or whose connection failed.
var ErrNodeLost = errors.New("gompj: node lost")

// RemoteError is the cause of a multi-node job ended by another node: it was lost (its process died, its
// connection failed) or one of its ranks failed or called Abort. Every blocked call on this node returned
// ErrAborted wrapping it.
type RemoteError struct {
	Node   int    // the node; -1 for the coordinator
	Ranks  string // "ranks 3-5" (empty for the coordinator)
	Lost   bool   // the node was lost, rather than aborting the job itself
	Code   int    // the abort code (Abort(code), or 1 for a failed rank)
	Reason string // what the node or the coordinator said
	// fromCoordinator marks notices that every node got from the coordinator, which need not be forwarded.
	fromCoordinator bool
}

func (e *RemoteError) Error() string {
	switch {
	case e.Node < 0:
		return fmt.Sprintf("gompj: job aborted by the coordinator: %s", e.Reason)
	case e.Lost:
		return fmt.Sprintf("gompj: lost node %d (%s): %s", e.Node, e.Ranks, e.Reason)
	}
	return fmt.Sprintf("gompj: node %d (%s) aborted the job (code %d): %s", e.Node, e.Ranks, e.Code, e.Reason)
}

// Unwrap makes errors.Is(err, ErrNodeLost) true for lost nodes.
func (e *RemoteError) Unwrap() error {
	if e.Lost {
		return ErrNodeLost
	}
	return nil
}

// ExitCode is the process exit status a job's error calls for: 0 for nil, the code of Abort(code) (on this node
// or another), else 1.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ab *ranks.AbortError
	if errors.As(err, &ab) && ab.Code > 0 && ab.Code < 256 {
		return ab.Code
	}
	var re *RemoteError
	if errors.As(err, &re) && !re.Lost && re.Code > 0 && re.Code < 256 {
		return re.Code
	}
	return 1
}

// abortCode is the code a local cause is forwarded to the other nodes with.
func abortCode(cause error) int {
	var ab *ranks.AbortError
	if errors.As(cause, &ab) && ab.Code >= 0 {
		return ab.Code
	}
	return 1
}
