package collectives

import (
	"sync/atomic"

	"github.com/gompj/gompj/ranks"
)

// Operation ids: the collective matching key.
//
// Every collective's messages travel on the communicator's collective context, so they never match user
// point-to-point traffic. To keep collectives apart from each other, each operation on a communicator gets an id,
// and its messages carry it in their tag: tag = id<<tagBits | base, where the base tag says what the message is
// within the operation (tagBcast, tagReduce, ...). Members number the operations of a communicator alike, because
// MPI has every member call the collectives of a communicator in the same order and every algorithm starts its
// operations (newP2P, or an id taken by a nonblocking collective at its start) on every member at the same point.
// So any number of collectives, blocking and nonblocking, with any algorithms, may be outstanding on a
// communicator at once, interleaved with point-to-point traffic, and no message of one can match a receive of
// another: their tags differ.
//
// Ids wrap: ordinary operations use opSpace ids, round robin, so two operations collide only if one is still in
// flight opSpace (about 67 million) operations later on the same communicator. Persistent collectives keep their
// id for their whole life, so they take theirs from a second range of their own (counted separately, in the order
// of their Init calls), which ordinary operations never reach.
//
// The highest wire tag, (2*opSpace-1)<<tagBits | (1<<tagBits - 1), is MaxTag-ReservedTags: the tags that
// communicator management reserves at the top of the collective context are never used.

// OpID is an operation's id on its communicator (see above).
type OpID uint32

const (
	tagBits = 4                             // base tags are below 1<<tagBits
	opSpace = 1 << (31 - tagBits - 1)       // ids of ordinary operations: [0, opSpace)
	pSpace  = opSpace - 1                   // ids of persistent operations: [opSpace, opSpace+pSpace)
	maxTag  = (opSpace+pSpace)<<tagBits - 1 // the highest tag an operation uses
)

// The base tags fit in tagBits, and the operations' tags stay clear of the reserved ones.
var (
	_ [1<<tagBits - numBaseTags]struct{}
	_ [ranks.MaxTag - ranks.ReservedTags - maxTag]struct{}
)

// Tag is the wire tag of operation id's messages of base tag base (0 < base < 16).
func Tag(id OpID, base int) int { return int(id)<<tagBits | base }

type opCounters struct {
	ops        atomic.Uint64 // ordinary operations started
	persistent atomic.Uint64 // persistent operations initialised
}

// nextOp returns the id of the communicator's next ordinary operation.
func (st *commState) nextOp() OpID { return OpID((st.seq.ops.Add(1) - 1) % opSpace) }

// nextPersistent returns the id of the communicator's next persistent operation.
func (st *commState) nextPersistent() OpID {
	return OpID(opSpace + (st.seq.persistent.Add(1)-1)%pSpace)
}
