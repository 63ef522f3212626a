package ranks

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkCopyShared times a copy between two Vector views (and between two slices) made alone (CopyMem) and
// shared with a helper goroutine spinning on the rank's help (copyShared), as a rank waiting for the copy does:
//
//	go test -run '^$' -bench CopyShared -count 5 ./ranks
func BenchmarkCopyShared(b *testing.B) {
	const blocks, stride = 4096, 1024 // float64s: the view benchmark's shape, and 4 blocks of 256 KiB
	for _, shape := range []struct{ count, bl, stride int }{{blocks, 1, stride}, {blocks, 8, stride}, {blocks, 64, stride},
		{4, 1 << 15, 1 << 16}, {}} {
		count, bl, stride := shape.count, shape.bl, shape.stride
		name := fmt.Sprintf("blocks%dx%d", count, bl)
		var dst, src Mem
		n := 1 << 17 // contiguous: 1 MiB
		if bl > 0 {
			sv, _ := Vector(make([]float64, count*stride), count, bl, stride)
			dv, _ := Vector(make([]float64, count*stride), count, bl, stride)
			src, _ = MemOf(sv)
			dst, _ = MemOf(dv)
			n = count * bl
		} else {
			name = "contiguous1MiB"
			src, _ = MemOf(make([]float64, n))
			dst, _ = MemOf(make([]float64, n))
		}
		b.Run(name+"/alone", func(b *testing.B) {
			for range b.N {
				CopyMem(dst, src, 8*n)
			}
		})
		b.Run(name+"/shared", func(b *testing.B) {
			rk := &Rank{coop: newCoop()}
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					rk.coop.help()
				}
			}()
			for range b.N {
				copyShared(dst, src, 8*n, rk)
			}
			stop.Store(true)
			wg.Wait()
		})
	}
}
