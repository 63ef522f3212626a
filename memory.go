package gompj

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/gompj/gompj/device"
)

// Element is the element types of primitive buffers: the slices gompj moves as they are, without encoding.
type Element interface {
	byte | int8 | int16 | int32 | int64 | int | uint16 | uint32 | uint64 | uint | float32 | float64 | complex64 |
		complex128 | bool
}

// Alloc returns a slice of n zeroed elements in the memory this node process moves fastest: MPI_Alloc_mem. Where
// the job has other node processes on this host, it is a part of the node's shared-memory segment, which those
// processes map: a large message from or into it is one plain copy between mappings, where Go memory costs a
// cross-memory-attach system call that walks and pins every page (`gompj bench alltoall -np 4 -nodes 2`: 8 MiB
// per pair ran several times faster from Alloc's memory). Elsewhere (one node process, GOMPJ_HOST_SHM=0, peers
// on other hosts only) it is Go memory, as make would give.
//
// Use it for large buffers exchanged with ranks in other node processes of the host, allocated once (NPB's
// alltoall buffers). Shared memory's pages are mapped when Alloc makes them (MADV_POPULATE_WRITE, Linux 5.14), not
// at their first touch: a page fault cost 12.5-14.5 us a page on the VM gompj is measured on, populating 0.4-1.4
// us. The memory belongs to the node process, not to the rank or the communicator, and outlives the job's end; the
// garbage collector does not reclaim it: give it back with Free when done.
func Alloc[T Element](c *Comm, n int) ([]T, error) {
	if c == nil || c.c == nil {
		return nil, fmt.Errorf("%w: Alloc on a nil communicator", ErrComm)
	}
	var zero T
	sz := int(unsafe.Sizeof(zero))
	if n < 0 || n > math.MaxInt/sz {
		return nil, fmt.Errorf("%w: Alloc of %d elements of %d bytes", ErrArg, n, sz)
	}
	b, err := c.c.World().Lend(n * sz)
	if errors.Is(err, device.ErrNoLending) {
		return make([]T, n), nil
	}
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), nil
}

// Free gives back a slice Alloc returned (MPI_Free_mem): s must start where Alloc's did, and no transfer may be
// using it. Afterwards s reads as zeros and writes to nothing shared; do not use it. Free of Go memory (Alloc's
// where no device lends any, or any other slice) does nothing: the garbage collector takes it.
func Free[T Element](c *Comm, s []T) error {
	if c == nil || c.c == nil {
		return fmt.Errorf("%w: Free on a nil communicator", ErrComm)
	}
	if cap(s) == 0 {
		return nil
	}
	var zero T
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), cap(s)*int(unsafe.Sizeof(zero)))
	return c.c.World().Unlend(b)
}
