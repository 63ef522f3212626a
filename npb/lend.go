package npb

import "github.com/gompj/gompj"

// The large buffers a kernel moves with Alltoall(v) (IS's keys, FT's slabs) come from gompj.Alloc: where the
// job has several node processes on one host, that is memory of the node's shared segment, which the other
// processes copy from and into straight between mappings instead of by cross-memory attach (a system call that
// walks and pins every page), as a C code would take them from MPI_Alloc_mem. Elsewhere Alloc gives Go memory.

// regrow replaces buf, from gompj.Alloc, by n zeroed elements from it: a buffer too short for what a kernel
// exchanges now. buf is in no transfer (the kernels grow buffers between their collectives).
func regrow[T gompj.Element](c *gompj.Comm, buf []T, n int) ([]T, error) {
	if err := gompj.Free(c, buf); err != nil {
		return nil, err
	}
	return gompj.Alloc[T](c, n)
}
