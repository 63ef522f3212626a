// Package harness runs a test's SPMD body in gompj's modes: on one node (goroutine ranks), on several node
// processes on this box with several ranks each, talking through the network device as on different hosts
// (GOMPJ_HOST_SHM=0), with one rank per node process (pure network, the same way), on several node processes
// sharing memory (the shm device, as node processes on one host do by default), and, in builds with -tags ofi,
// on several node processes talking through the rdma device over libfabric's tcp provider. Node
// processes are the test binary itself, re-executed with -test.run selecting the same subtest and the job's
// identity in GOMPJ_* variables; the parent runs the bootstrap coordinator, waits for the children and fails the
// subtest with their output when one fails.
//
// Imports: gompj, gompj/node, gompj/node/bootstrap, internal/env (the job's identity), internal/proc (process
// groups, exit statuses) and the standard library (tests only).
package harness
