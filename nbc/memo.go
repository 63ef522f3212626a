package nbc

import (
	"slices"
	"unsafe"
	"weak"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/ranks"
)

// The last call of each kind. A program starts the same small collective again and again (a residual's
// Iallreduce at every step, OSU's loops), and most of what such a start cost was finding out what the caller had
// already told the last time: resolving the arguments (collectives.Resolve*, about 1300 instructions for an 8-byte
// Iallreduce), choosing the algorithm (300), matching the kept operations (cache.go, 130). So each rank remembers,
// per communicator and kind of call, the arguments of its last successful start as they were given (the buffers'
// element type and memory, the op, the root) and the operation that ran it; a start with the very same arguments,
// while no Force has changed the choice of algorithm since, runs that operation again at once if it has finished.
// Whatever the memo does not recognise (Views, objects, InPlace, counts and displacements, the rarer element types)
// takes the full path, which gives the same operation.

// callKind names the calls the memo serves.
type callKind uint8

const (
	kindBarrier callKind = iota
	kindBcast
	kindReduce
	kindAllreduce
	kindGather
	kindScatter
	kindAllgather
	kindAlltoall
	kindReduceScatterBlock
	kindReduceScatter
	kindScan
	kindExscan
	numKinds
)

// bufKey is a buffer argument as the memo compares it: its element type and its memory. The memo takes only nil
// and the common primitive slices (ok false otherwise). The address is a number, not a pointer: the memo must not
// keep a large call's buffers alive (remember). It cannot mistake another buffer for this one either: whatever the
// memo runs again (its tiny call, or its operation, which a weak memo reaches only while it lives) holds this
// buffer, whose address no other allocation can take meanwhile.
type bufKey struct {
	typ      uint8
	ptr      uintptr
	len, cap int
}

// callKey is a call's arguments as the memo compares them.
type callKey struct {
	kind       callKind
	send, recv bufKey
	op         collectives.Op
	root       int
	ok         bool // both buffers are of a kind the memo takes
}

// memo is the last call of one kind on a communicator, and the operation that ran it, or its resolved call if it
// was tiny (tiny.go). A large call's operation, which the cache keeps only weakly (cache.go), the memo keeps weakly
// too (weakOp).
type memo struct {
	key    callKey
	o      *op
	weakOp weak.Pointer[op]
	tiny   *collectives.Call
	gate   bool   // a barrier through the barrier in shared memory (gate.go)
	hgate  bool   // a node-aware barrier's member that runs no operation (hiergate.go)
	forces uint32 // collectives.Forces when it was chosen
}

// op returns the memo's operation, if any, and if it has finished; nil if a weakly kept one has been collected.
func (m *memo) op() *op {
	o := m.o
	if o == nil {
		o = m.weakOp.Value()
	}
	if o == nil || !o.done.Load() {
		return nil
	}
	return o
}

func keyOf(kind callKind, send, recv any, op collectives.Op, root int) callKey {
	s, ok1 := bufKeyOf(send)
	r, ok2 := bufKeyOf(recv)
	return callKey{kind: kind, send: s, recv: r, op: op, root: root, ok: ok1 && ok2}
}

func bufKeyOf(b any) (bufKey, bool) {
	switch v := b.(type) {
	case nil:
		return bufKey{}, true
	case []float64:
		return sliceKey(v, 1), true
	case []byte:
		return sliceKey(v, 2), true
	case []int:
		return sliceKey(v, 3), true
	case []float32:
		return sliceKey(v, 4), true
	case []int64:
		return sliceKey(v, 5), true
	case []int32:
		return sliceKey(v, 6), true
	case []uint64:
		return sliceKey(v, 7), true
	case []uint32:
		return sliceKey(v, 8), true
	case []complex128:
		return sliceKey(v, 9), true
	}
	return bufKey{}, false
}

func sliceKey[T any](s []T, typ uint8) bufKey {
	return bufKey{typ: typ, ptr: uintptr(unsafe.Pointer(unsafe.SliceData(s))), len: len(s), cap: cap(s)}
}

// again starts call k on c by running its memo's operation again, and returns its request; nil if the memo does not
// have this call, or its operation has not finished (the caller then takes the full path).
func again(c *ranks.Comm, k *callKey) *ranks.Request { return againWith(c, k, nil) }

// againWith is again for a call with counts (a reduce_scatter's), which the memo compares by value: the kept call
// holds a copy of its own (start, keep), and a program may change its slice's values between calls.
func againWith(c *ranks.Comm, k *callKey, counts []int) *ranks.Request {
	if !k.ok || c.Check() != nil || c.IsInter() {
		return nil // the full path says what is wrong
	}
	cc := cacheOf(c)
	m := &cc.memo[k.kind]
	if m.key != *k || m.forces != collectives.Forces(c) || (counts != nil && !slices.Equal(m.counts(), counts)) {
		return nil
	}
	if m.gate {
		k.started(c) // the call takes place, as in start
		return gateBarrier(c, cc)
	}
	if m.hgate {
		k.started(c)
		return cc.hgate.start(c)
	}
	if m.tiny != nil {
		k.started(c)
		return startTiny(c, cc, m.tiny)
	}
	o := m.op()
	if o == nil {
		return nil
	}
	gen := ranks.EnterOps(c) // as start
	defer ranks.LeaveOps(c, gen)
	if o.chain {
		r := o.chainAgain(c, cc)
		if r != nil {
			k.started(c) // on a communicator spread over nodes: nothing counted in its shared memory goes before it
		}
		return r
	}
	if !o.hold() {
		return nil
	}
	k.started(c) // before the op's run: its entries on the ring carry the call's number (shmb.onRing)
	o.againHeld(c, cc)
	return o.req
}

// started counts the call of key k on c (collectives.Started), as start does for the full path.
func (k *callKey) started(c *ranks.Comm) { collectives.Started(c, callKinds[k.kind], k.root) }

// callKinds gives the call check's kind of each kind of call the memo serves.
var callKinds = [numKinds]ranks.CallKind{kindBarrier: ranks.CallBarrier, kindBcast: ranks.CallBcast,
	kindReduce: ranks.CallReduce, kindAllreduce: ranks.CallAllreduce, kindGather: ranks.CallGather,
	kindScatter: ranks.CallScatter, kindAllgather: ranks.CallAllgather, kindAlltoall: ranks.CallAlltoall,
	kindReduceScatterBlock: ranks.CallReduceScatter, kindReduceScatter: ranks.CallReduceScatter,
	kindScan: ranks.CallScan, kindExscan: ranks.CallExscan}

// counts returns the counts of m's call.
func (m *memo) counts() []int {
	if m.tiny != nil {
		return m.tiny.Counts
	}
	if o := m.op(); o != nil && o.key != nil {
		return o.key.Counts
	}
	return nil
}

// remember makes o the memo of call k on c (start's full path, once o is running), if o is kept for reuse.
func remember(c *ranks.Comm, k *callKey, o *op, forces uint32) {
	if k == nil || !k.ok || o.key == nil {
		return
	}
	if o.weak { // a large call's, kept weakly (cache.go): the memo must not hold it, with the caller's buffers
		cacheOf(c).memo[k.kind] = memo{key: *k, weakOp: weak.Make(o), forces: forces}
		return
	}
	cacheOf(c).memo[k.kind] = memo{key: *k, o: o, forces: forces}
}
