package ranks

import (
	"fmt"
	"testing"
	"unsafe"
)

// BenchmarkViewCopy: packing (view to slice), unpacking (slice to view) and view to view, for a column of
// one-element blocks, blocks of 3 and of 8 float64 (64 bytes), against copying the same bytes contiguously.
//
//	go test -run '^$' -bench BenchmarkViewCopy -benchtime 1s ./ranks
func BenchmarkViewCopy(b *testing.B) {
	const blocks, stride = 4096, 1024
	for _, bl := range []int{1, 3, 8} {
		src := make([]float64, blocks*stride)
		dst := make([]float64, blocks*stride)
		flat := make([]float64, blocks*bl)
		sv, _ := Vector(src, blocks, bl, stride)
		dv, _ := Vector(dst, blocks, bl, stride)
		sm, _ := MemOf(sv)
		dm, _ := MemOf(dv)
		fm, fb := sliceMem(TypeFloat64, flat), unsafe.Slice((*byte)(unsafe.Pointer(&flat[0])), len(flat)*8)
		n := blocks * bl * 8
		b.Run(fmt.Sprintf("block%d/pack", bl), func(b *testing.B) {
			b.SetBytes(int64(n))
			for range b.N {
				sm.CopyTo(fb)
			}
		})
		b.Run(fmt.Sprintf("block%d/unpack", bl), func(b *testing.B) {
			b.SetBytes(int64(n))
			for range b.N {
				dm.CopyFrom(fb)
			}
		})
		b.Run(fmt.Sprintf("block%d/view-to-view", bl), func(b *testing.B) {
			b.SetBytes(int64(n))
			for range b.N {
				CopyMem(dm, sm, n)
			}
		})
		b.Run(fmt.Sprintf("block%d/contiguous", bl), func(b *testing.B) {
			b.SetBytes(int64(n))
			other := make([]float64, len(flat))
			om := sliceMem(TypeFloat64, other)
			for range b.N {
				CopyMem(om, fm, n)
			}
		})
	}
}
