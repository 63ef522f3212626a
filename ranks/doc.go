// Package ranks is the rank layer of gompj: communicators (Comm), point-to-point messaging, requests and statuses.
//
// A World is one node process's share of a job: its local ranks, each with its posted and unexpected queues, and
// the node's network device for ranks elsewhere. A send to a rank on this node locks that rank's queues and either
// copies straight into a posted receive, or leaves an eager copy (small messages) or a reference to the sender's
// slice (rendezvous: the receiver copies, then the send completes). Eager copies waiting at a rank are bounded by
// its share of the node's limit: past it, eager sends to that rank go rendezvous (see Rank.reserve). A send to a
// rank on another node goes to the device, which delivers into the destination rank's queues through World's Sink
// methods: the same matching, so AnySource covers local and remote senders alike.
//
// Buffers are slices of primitive types, moved as memory, Views (view.go: a selection of a slice's elements, moved
// block by block: on this node strided source to strided destination, through the device as pieces where it
// implements device.Segmented, else packed), or any other value, msgpack-encoded. Every message carries its element
// type; a mismatch is ErrType and a short buffer ErrTruncate, with what fits delivered.
//
// Virtual topologies (topo.go): Cartesian grids, graphs and distributed graphs, attached to the communicators
// CartCreate, CartSub, GraphCreate and DistGraphCreateAdjacent make (and Dup keeps), built once.
//
// Requests follow one life cycle, whatever their kind (send, receive, operation; one-shot or persistent): active
// from their start until a completion call reports them complete, inactive afterwards, released by Free. The
// completion calls look at a request only through poll, blocker and report (completion.go); what only some
// requests need (an operation, a persistent request's recipe) sits in a cold extension, so that the line a
// matching sender touches stays the first and only one (TestRequestLayout). Persistent collectives are built with
// NewPersistentRequest and share Start, Startall and Free with persistent point-to-point requests. A Request is a
// small handle on its state (handle.go), so that a small collective's state can serve its rank's next one once
// reported, while the handle the program still holds reads as reported.
//
// Communicators (manage.go, group.go, inter.go): Dup, Split, Create and CreateGroup make intracommunicators,
// IntercommCreate and Merge intercommunicators, all with contexts agreed among their members with no central
// allocator (agree.go), safe when several goroutines of a rank create communicators at once. Groups are ordered
// sets of world ranks.
//
// The call check (callcheck.go): on a communicator that spans nodes, each member logs its collective calls
// (NoteCall, from the API's entry points) and the node compares the calls its ranks stay in with the other members'
// (CheckCalls, which the node calls every GOMPJ_CALL_CHECK), so that members that disagree about a root, or about
// which collective comes next, end the job instead of hanging.
//
// Imports: queues, device, internal/mem, msgpack, the standard library. Nothing above it (collectives, nbc, node,
// root).
package ranks
