// Package collectives implements gompj's blocking collective operations (MPI_Barrier, Bcast, Reduce, Allreduce,
// Gather(v), Scatter(v), Allgather(v), Alltoall(v), Reduce_scatter(_block), Scan, Exscan) over a ranks.Comm.
//
// Every call picks an algorithm at run time from a selection table (table.go) by the communicator's layout (all
// members on this node, or spread over several nodes), its size and the message size, as FastMPJ does. Users
// override the table with a file (GOMPJ_COLL_TABLE), per collective with GOMPJ_COLL_<NAME>=algo, or per
// communicator and call site with Force. Describe prints the table for `gompj info`.
//
// Three families of algorithms:
//
//   - shared memory (shm.go), when every member of the communicator lives on this node: ranks publish pointers to
//     their buffers in a structure the communicator's local members share (ranks.World.Shared) and copy or combine
//     straight from each other's memory, one copy per byte; synchronisation is on atomic counters (a generation
//     counting barrier and per-rank publication/acknowledgement counters) with the spin, yield, park waiting of
//     queues.Policy, so 64 ranks on 2 cores neither burn the CPU nor deadlock. No locks on the hot path. Alltoall(v)
//     needs no barrier at all: members expose their buffers by an epoch, and each block is copied once by whichever
//     of its two ends claims it first (an atomic per block), so a late member is not waited for twice.
//   - message based (p2p.go) over the communicator's collective context (Comm.Coll), so collective traffic never
//     matches user point-to-point messages: dissemination barrier; binomial and scatter+allgather bcast; binomial
//     reduce; recursive doubling, Rabenseifner and ring allreduce; ring, Bruck and recursive doubling allgather;
//     Bruck, linear and pairwise alltoall(v); linear and binomial gather/scatter; chain scan. Tags stay below
//     MaxTag-ReservedTags. Every algorithm handles any communicator size.
//   - node-aware (hier.go) for communicators spanning nodes (barrier, bcast, reduce, allreduce, gather, scatter,
//     allgather, alltoall): a shared-memory phase inside each node, an inter-node phase among one leader per node
//     (its lowest rank) over point-to-point, then shared memory again; the sub-communicators are made with Split on
//     first use, and any rank-to-node layout works. Reductions need a commutative op for this (otherwise the flat
//     algorithms run). The node-aware alltoall sends one message per pair of nodes instead of one per pair of
//     ranks: each leader packs its members' blocks for another node straight out of their send buffers.
//
// On intercommunicators (inter.go), every collective but Scan and Exscan behaves as MPI defines it there, built
// from the same collectives over each group's local communicator plus messages between the groups; Scan and
// Exscan return ErrComm.
//
// Neighbourhood collectives (neighbor.go) send to and receive from a topology's neighbours: a plan made once per
// communicator, with a persistent request per edge that each call starts on its blocks (or, algorithm hybrid,
// shared memory with the neighbours on this node and messages to the others); ResolveNeighbor* give package nbc
// the edges of the nonblocking and persistent forms.
//
// Buffers are primitive slices (ranks.MemOf), Views (packed on entry into this rank's scratch and unpacked on
// exit, views.go; the neighbourhood collectives move them unpacked) or slices of Loc pairs (MaxLoc/MinLoc). Bcast,
// Gather, Allgather and Scatter also move other values, msgpack-encoded (objects.go): a pointer for Bcast, a value
// sent and a pointer to a slice received for Gather and Allgather, a slice sent and a pointer received for Scatter.
// Reductions dispatch once per call on the element type and the op to a generic kernel: no interface call per
// element. Buffers are copied with internal/mem's Copy, which keeps copies of a few MiB in cache.
//
// What is checked, and what is not: buffer lengths against counts on the calling rank (ErrTruncate, ErrArg),
// roots (ErrRoot), ops against element types (ErrOp), and, for shared-memory paths, lengths against the peer's
// buffer, so a mismatch is an error and never an overrun. As in MPI, mismatched roots, ops or element types across
// ranks are erroneous programs; gompj does not detect them all (element types are not compared across ranks on
// message paths, where blocks travel as bytes), but it never writes outside the buffers it was given. Roots are
// compared inside a node by the shared-memory paths, and across nodes, where this package's algorithms would hang,
// by the call check of package ranks (callcheck.go), which the root package's entry points feed; it also ends a job
// whose members disagree across nodes about which collective comes next. On message
// paths a buffer that does not match the root's or the peers' is seen only by the rank whose message arrives too
// long for it; a rank that fails part-way while others still wait on it (its children in a tree, its partners in
// later steps) ends the job, naming itself and the error (p2p.go, Broken; node-aware leaders in hier.go), rather
// than leave them waiting for ever, and a leaf that fails alone leaves the job going on. Inside a node, an
// allreduce or allgather whose members' sizes differ so much that they take different paths (inline, staged,
// direct: shm.go, paths) ends the job the same way, and so do members that disagree about which collective comes
// next, or name each other the root: each call counts itself (started), a wait about to park in shared memory
// declares its call, and the member that finds every other parked or returned compares them (shm.go, parking).
//
// Per-communicator state (layout, forced algorithms, cached choices, node-aware sub-communicators, and the scratch
// memory the algorithms reuse from call to call, so that a call allocates nothing once warmed up) is found through
// a process-wide cache keyed by the Comm (weak pointers; state.go): it is per rank, since every rank has its own
// Comm values, and it dies with the Comm.
//
// Imports: ranks, queues, internal/env (its GOMPJ_COLL_* variables), internal/mem, the standard library. Not node,
// not the root package.
package collectives
