package ranks

import (
	"fmt"

	"github.com/gompj/gompj/device"
)

// Lend returns n zeroed bytes of memory the node's devices move faster than Go memory (device.Lender: node
// processes on this host copy lent memory straight between mappings), or device.ErrNoLending where no device
// lends any: a job of one node process, shared memory turned off (GOMPJ_HOST_SHM=0), or peers on other hosts only.
func (w *World) Lend(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: %d bytes to allocate", ErrArg, n)
	}
	if l, ok := w.dev.(device.Lender); ok {
		return l.Alloc(n)
	}
	return nil, device.ErrNoLending
}

// Unlend gives back memory Lend returned (b starting where it did); other memory is left alone.
func (w *World) Unlend(b []byte) error {
	if l, ok := w.dev.(device.Lender); ok {
		_, err := l.Free(b)
		return err
	}
	return nil
}
