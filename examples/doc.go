// Package examples holds small SPMD programs written against gompj's public API, one per directory: hello, ring,
// pingpong, halo (a heat diffusion with persistent requests), npb (the NAS kernels: `gompj run -np 4 ./examples/npb
// CG S`) and heat2d (a Jacobi heat solver on a Cartesian grid: topologies, views, neighbourhood collectives). Run
// them on this box with `gompj run -np 4 ./examples/hello`, or on node processes with
// `gompj run -np 8 -nodes 2 ./examples/ring`.
package examples
