// Package npb holds the NAS Parallel Benchmark kernels EP, IS, CG, MG and FT
// written against gompj's public message-passing API, so that the runtime can
// be measured the way the MPI papers measure theirs.
//
// Each kernel follows the data decomposition and communication pattern of the
// NPB 3.x MPI versions: EP runs independent batches and reduces the sums, IS
// sorts buckets and redistributes keys with Alltoall and Alltoallv, CG works
// on a two-dimensional process grid with row and transpose exchanges, MG
// decomposes the grid in three dimensions with halo exchanges, and FT
// transposes a slab decomposition with Alltoall. The numbers are produced by
// the NPB pseudo-random generator (randlc/vranlc, a = 5^13, modulus 2^46) and
// checked against the official verification values with the official
// tolerances; a run that does not match is reported UNSUCCESSFUL, never
// passed by construction.
//
// Run, RunEP, RunIS, RunCG, RunMG and RunFT are called by every rank of a
// communicator (SPMD); each returns the same Result on every rank. Ranks may
// be goroutines of one process, so this package keeps no mutable package
// state: everything a rank owns lives in the call's locals.
//
// Imports: the gompj root package and the standard library only.
package npb
