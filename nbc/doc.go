// Package nbc implements gompj's nonblocking (MPI-3) and persistent (MPI-4) collectives: Ibarrier ... Iexscan
// and BarrierInit ... ExscanInit on a ranks.Comm, which the root package exposes as methods of Comm.
//
// Each call resolves its arguments as the blocking collective does (collectives.Resolve*: the same error
// classes), takes the next operation id of the communicator (collectives.NextOp: its messages' tags carry it, so
// any number of collectives may be outstanding beside blocking ones and point-to-point traffic), picks its
// algorithm from the blocking collectives' table (the nonblocking name, iallreduce, first: GOMPJ_COLL_I<NAME>),
// and builds a schedule (engine.go): rounds of local steps (copies, reductions, functions) then communication
// steps (sends, receives, waits on shared-memory conditions, sub-operations). The schedules are the blocking
// algorithms cut at their waits: message-based ones (p2p.go), shared-memory ones on a ring of slots per
// communicator (shm.go, after FastMPJ's slot protocol, mended), node-aware ones as phases on the node's and the
// leaders' communicators (hier.go). A schedule is a state machine that does no I/O itself: a transport posts its
// communication steps and reports their completions (transport.go), so unit tests drive it with a fake network that
// completes steps in any order (engine_test.go, a randomised model test of every algorithm).
//
// An op (op.go) runs a schedule for one rank. It moves on when one of its child requests completes (a hook on the
// child's completion, queues.Completion.OnComplete), or a shared-memory peer changes what it waits for (a wait
// list): it is then run by a waiting completion call of its rank, or else by the node's worker pool
// (ranks.Executor, node's ants pool), so that it advances while its rank computes and calls nothing. Runs are
// serialised, so a worker and the owner's Wait may meet. The rank's completion calls run all its active ops (MPI's
// progress rule; ranks/ops.go); the run that sees the schedule finish completes the request (ranks.CompleteOp). A
// Wait on an op that is its rank's only active one, within the node, runs it itself and spins on the condition its
// schedule waits for (op.Spin, ranks.Spinner), as a blocking collective spins on its peers' slots: no kick, signal
// or worker stands between a peer's move and the waiter. The starting call runs the op's first round itself, except
// in overlap mode (ranks.World.Overlap, GOMPJ_OVERLAP), where a worker starts an op that crosses node processes
// and is not small, and the call returns at once (op.launch).
//
// A small call on a communicator within one node (each member's contribution fits in its slot entry) has no op:
// its members publish their contributions in a slot and the last to arrive does the whole collective for all and
// completes every member's request (tiny.go). So does a small persistent one at each Start, and a node-aware op's
// small phase inside the node. An Ibarrier on such a communicator has no slot either: it arrives at the barrier
// that Barrier passes in shared memory, and its request waits on that barrier's count (gate.go). Across nodes,
// every member arrives at its node's count and waits for its leader's release (hiergate.go); between two nodes the
// leader runs no op either, its exchange with the other leader carried out by hooks (lead.go).
//
// A persistent op is built once by its Init call, with persistent child requests and a shared-memory slot of its
// own, and run again by each Start without allocating; a nonblocking op is kept and reused when the same call comes
// again (cache.go): a small call's outright, a large call's through a weak pointer, so as not to keep the program's
// buffers alive.
//
// Imports: collectives, ranks, queues, internal/mem, the standard library.
package nbc
