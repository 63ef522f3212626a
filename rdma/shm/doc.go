// Package shm is the rdma provider for node processes on one host, in pure Go (Linux, default build).
//
// # Memory
//
// Each node has one segment: a memfd (it has no name in any file system, so nothing is left in /dev/shm or
// anywhere else, even after SIGKILL), mode 0600 and sealed against shrinking (a peer holding it cannot truncate it
// under our mappings, which would crash us with SIGBUS). It starts with a control page (the doorbell) and gains
// one inbound ring per peer as peers connect. A node writes only into its peers' rings and reads only its own.
//
// A ring carries messages in cache-line cells, lock-free (ring.go has the layout): producers reserve cells with a
// compare-and-swap on a tail in their own memory and publish an entry by storing its sequence number last; the
// consumer reads the cell at its head and nothing else, copies the entry into a posted receive, clears the cells
// and advances the head. A waiting rank polls the rings itself, so a small message costs no system call: the
// producer looks at the consumer's sleeping flag and rings the doorbell only while the consumer's progress
// goroutine sleeps; the producer that rings lowers the flag, so one sleep costs one system call however many
// messages arrive before the sleeper runs again. A producer that finds a ring full raises a flag in the ring's
// header, and the consumer that frees room rings the producer's doorbell in turn (ring.go), so a node whose sends
// wait for room does not sleep out a timeout. The doorbell is an eventfd, passed with the segment: the
// sleeper reads it through Go's netpoller, so it is parked like a goroutine reading a socket and its thread and P
// serve the ranks meanwhile (a sleep in a system call kept them until sysmon took the P back).
//
// Every entry is validated before use, as netdev validates frames: a sequence number that is not the next one, a
// length over the limit or cells that do not match it, a head the producer cannot have reached. A corrupt entry
// makes the peer lost (the job aborts naming it); nothing is read or written outside the ring and the posted
// buffer. FuzzRingConsumer feeds the consumer arbitrary ring contents.
//
// # Connections
//
// Each node listens on an abstract Unix socket (a random name in the network namespace, gone with the process).
// The lower node id dials; both ends prove the job secret (netdev/auth, purpose "shm") and the acceptor checks
// that the peer runs as the same user (SO_PEERCRED). Each end then makes the other's inbound ring in its segment
// and passes the segment's descriptor and its doorbell's (SCM_RIGHTS); each maps the other's and checks that the
// doorbell is a non-blocking eventfd. The connection stays open: a goodbye on it is a clean close, its end without
// one is a dead peer (SIGKILL): the peer is reported lost at once.
//
// # Large messages
//
// With cross-memory attach (CMA), Read and Write are process_vm_readv and process_vm_writev between the two
// processes: one copy, by the CPU of whichever end issues it (the device splits a large message between both).
// Memory the program took from Alloc (gompj.Alloc, heap.go) is a part of the segment, which every peer already
// holds: its registration's key carries the offset, and a Read or Write of it is a plain copy between the peer's
// mapping of that part and the local buffer, with no system call and no page pinning (CMA pins every 4 KiB page).
// A peer maps the whole segment (again, twice as long, when it has grown past the mapping); an offset past the
// segment goes by CMA, which names the same bytes by address. This needs no CMA: where the kernel refuses CMA,
// lent memory still moves in one copy (LentRMA), and only other memory is streamed through the rings. Free punches
// the part out of the segment for a later Alloc and leaves private zero pages where it was mapped.
// Messages up to 32 KiB still go eager, through the rings: two copies, but no round trip of RTS and FIN, whose
// cost is more than a second copy of that much (`gompj bench latency -np 2 -nodes 2`: 8 KiB 2.7 µs eager against
// 16 µs by rendezvous, 32 KiB 8-10 against 26-34 µs; with a 64 KiB limit, 64 KiB went no faster). The peer's pid
// comes from the socket's credentials, and each end checks at connect time that it can read the other. Where CMA
// is refused (Yama ptrace_scope 2 or 3, a seccomp filter, containers), or GOMPJ_CMA=0 forces it off, the provider
// has no RMA and the device streams large messages through the rings instead; Describe (shown by `gompj info` and
// the route table) says which, and why. Where Yama allows ptrace of descendants only (scope 1),
// the provider lets any process of the user attach (PR_SET_PTRACER_ANY), as a job's node processes are not each
// other's descendants.
//
// Imports: gompj/rdma, gompj/netdev/auth, gompj/internal/mem, golang.org/x/sys/unix and the standard library.
package shm
