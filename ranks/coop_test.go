package ranks

import (
	"fmt"
	"sync"
	"testing"
)

// TestCopyShared: a copy shared with a helper that keeps taking chunks (as a spinning waiter's help does) fills
// the destination exactly, contiguous or strided, whatever the size against the chunk; and once copyShared
// returns, no helper touches either buffer (the destination is checked after the source is overwritten).
func TestCopyShared(t *testing.T) {
	rk := &Rank{coop: newCoop()}
	const stride = 3
	for _, elems := range []int{1, 100, coopMin/8 - 1, coopMin / 8, coopMin/8 + 5, 5*coopChunk/8 + 3, 40000} {
		for _, bl := range []int{0, 1, 3, 64 << 10} { // 0: contiguous; else blocks of bl elements (at most elems)
			strided := bl > 0
			bl := min(bl, elems)
			if strided && elems%bl != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%d/%d", elems, bl), func(t *testing.T) {
				src := make([]float64, elems*stride)
				dstBuf := make([]float64, elems*stride)
				for i := range src {
					src[i] = float64(i + 1)
				}
				var dst, from Mem
				if strided {
					sv, err := Vector(src, elems/bl, bl, stride*bl)
					if err != nil {
						t.Fatal(err)
					}
					dv, err := Vector(dstBuf, elems/bl, bl, stride*bl)
					if err != nil {
						t.Fatal(err)
					}
					from, _ = MemOf(sv)
					dst, _ = MemOf(dv)
				} else {
					from, _ = MemOf(src[:elems])
					dst, _ = MemOf(dstBuf[:elems])
				}
				stop := make(chan struct{})
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
							rk.coop.help()
						}
					}
				}()
				copyShared(dst, from, elems*8, rk)
				for i := range src {
					src[i] = -1 // a helper still copying would carry this into dst
				}
				close(stop)
				wg.Wait()
				for i := 0; i < elems; i++ {
					at := i
					if strided {
						at = i/bl*stride*bl + i%bl
					}
					if want := float64(at + 1); dstBuf[at] != want {
						t.Fatalf("element %d is %v, want %v", i, dstBuf[at], want)
					}
				}
				if rk.coop.busy.Load() || rk.coop.job.Load() != nil {
					t.Fatal("the slot is still taken after the copy")
				}
			})
		}
	}
}
