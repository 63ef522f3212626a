// Package mem copies the bytes of messages and collective buffers: Copy is the built-in copy, cut into pieces where
// that runs faster.
//
// Go's runtime copies 1 MiB or more on amd64 with non-temporal stores, which go past the caches to memory (the
// runtime's memmove, for copies too large to stay in cache). A collective's buffers of a few MiB do stay in cache
// here, and what it copies is read again at once: by the next round's reduction, by the peer that copies it on, by
// the user. Copied in pieces below that size, 1 MiB moved at 57 GB/s against 39, 8 MiB at 60 against 39 (a 32 MiB
// last-level cache; at 12 MiB, whose source and destination no longer fit, both ran at 39). Copy cuts such copies
// in pieces up to a quarter of each CPU's share of the last-level cache (a job's ranks copy at the same moments, and
// each one's source and destination should fit in half its share: 4 MiB on this 2-CPU machine, 1 MiB where 8 CPUs
// share 32 MiB), and leaves larger ones, and every copy on other architectures, to the runtime.
//
// Imports: internal/cpus (the CPUs sharing a cache), the standard library.
package mem
