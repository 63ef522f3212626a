// Package ofi is the rdma provider over libfabric (OFI): InfiniBand and RoCE (verbs;ofi_rxm), EFA, Slingshot
// (cxi), Omni-Path (psm3), and libfabric's own tcp;ofi_rxm and shm providers, which need no special hardware.
// It is a thin cgo layer of its own (gofi.c: one C call per libfabric operation) behind the build tag ofi; a
// build without the tag has no cgo and only the wire format of this file's neighbours, and node refuses -dev rdma
// with "built without ofi: rebuild with -tags ofi".
//
// # Fabric
//
// Endpoints are FI_EP_RDM (connectionless, reliable) with FI_TAGGED where the provider offers it, else FI_MSG
// with remote CQ data, plus FI_RMA where offered (without it the device streams rendezvous data through
// messages). FI_PROVIDER chooses the provider as libfabric documents it; Options.Provider overrides it, and
// without either the first provider libfabric lists that reaches other hosts is taken (not shm). For socket
// address fabrics Options.Source (node passes the address that routes to the coordinator) picks the interface.
// The registration modes the provider demands (FI_MR_LOCAL, FI_MR_VIRT_ADDR, FI_MR_PROV_KEY, FI_MR_ALLOCATED,
// FI_MR_ENDPOINT) are honoured and reported through rdma.Caps and Describe.
//
// # Messages
//
// Every message carries a 32-bit word (wire.go) naming its sender node, as the tag or as CQ data, so receives
// need no FI_SOURCE. The provider's own control messages share the device's posted receives (so that they keep
// their place in each sender's order) and are taken out before the device sees them: hello (the peer is up and
// of this job: Ready waits for one from every peer), heartbeat, and goodbye (sent by Close; it says how many
// messages came before it, and the peer reports OpPeerClosed only once all of them arrived).
//
// # Faults
//
// libfabric's RDM endpoints do not report a peer that died: tcp;ofi_rxm answers a send to it with FI_EAGAIN as
// long as it tries to reconnect. So every endpoint sends a heartbeat to each peer every Options.Heartbeat and
// reports OpPeerLost for a peer it has not heard from (any message, or a Read or Write it answered, counts) in
// Options.LossTimeout. With FI_TAGGED heartbeats carry a tag bit of their own and land in receives the endpoint
// posts itself, so that a peer is heard even while the device holds every buffer it posted. Operations
// that fail (fi_cq_readerr) complete with an error naming the call and the peer; calls that fail return one;
// FI_EAGAIN is rdma.ErrAgain. Nothing panics and nothing waits without a bound.
//
// # Memory
//
// libfabric keeps the addresses of registered memory and of posted buffers after the call returns, which cgo
// allows only for pinned Go memory: a registration pins its buffer (runtime.Pinner) until Close, and a buffer
// posted without a registration is pinned until its completion. The endpoint's own memory (contexts, completion
// and control buffers) is C memory.
//
// # Progress
//
// Poll reads up to len(cs) completions in one call of C (fi_cq_read) and translates them in place; small
// messages go by fi_inject (no completion); Wait blocks in fi_cq_sread asking for no entry, so it never takes a
// completion out of order from Poll, and Wake is fi_cq_signal.
//
// Imports: gompj/rdma and the standard library; C: libfabric ≥ 1.17 (Debian: libfabric-dev).
package ofi
