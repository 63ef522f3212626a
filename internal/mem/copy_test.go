package mem

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestCopy: Copy moves what copy moves and returns its count, for lengths around every size it decides on
// (nonTemporalMin, piece, cutMax) and offsets that leave the buffers unaligned, with dst or src the shorter.
func TestCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	big := max(cutMax(), 1<<20) + 3*piece
	src := make([]byte, big+64)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	lens := []int{0, 1, 63, piece - 1, piece, piece + 1, 1<<20 - 1, 1 << 20, 1<<20 + 1, 1<<20 + piece + 7,
		3<<20 + 5, cutMax() - 1, cutMax(), cutMax() + 1}
	for _, n := range lens {
		for _, off := range []int{0, 1, 13} {
			for _, shorter := range []string{"none", "dst", "src"} {
				dn, sn := n, n
				switch shorter {
				case "dst":
					dn = max(n-piece/2-3, 0)
				case "src":
					sn = max(n-piece/2-3, 0)
				}
				want := make([]byte, dn+32)
				got := make([]byte, dn+32)
				for i := range want {
					want[i] = 0xa5
					got[i] = 0xa5
				}
				s := src[off : off+sn]
				wn := copy(want[off%7:off%7+dn], s)
				gn := Copy(got[off%7:off%7+dn], s)
				if gn != wn || !bytes.Equal(got, want) {
					t.Fatalf("n=%d off=%d shorter=%s: Copy returned %d (copy %d), bytes equal: %v", n, off, shorter,
						gn, wn, bytes.Equal(got, want))
				}
			}
		}
	}
}

// TestCopyOverlap: overlapping buffers, either way round, end as copy (memmove) leaves them; cut in forward pieces
// a destination above its source would read bytes already overwritten.
func TestCopyOverlap(t *testing.T) {
	n := 2 << 20
	for _, shift := range []int{-piece - 1, -5, 5, piece + 1} {
		base := make([]byte, n+2*piece+16)
		for i := range base {
			base[i] = byte(i * 7)
		}
		want := bytes.Clone(base)
		lo := piece + 8
		copy(want[lo+shift:lo+shift+n], want[lo:lo+n])
		got := base
		if k := Copy(got[lo+shift:lo+shift+n], got[lo:lo+n]); k != n {
			t.Fatalf("shift %d: Copy returned %d, want %d", shift, k, n)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("shift %d: overlapping Copy differs from copy", shift)
		}
	}
}

func TestDisjoint(t *testing.T) {
	b := make([]byte, 100)
	for _, tc := range []struct {
		a, b []byte
		want bool
	}{
		{b[0:10], b[10:20], true}, {b[0:11], b[10:20], false}, {b[15:20], b[10:20], false}, {b[20:30], b[10:20], true},
		{b[0:0], b[0:10], true}, {nil, b, true}, {b, make([]byte, 100), true},
	} {
		if got := Disjoint(tc.a, tc.b); got != tc.want {
			t.Errorf("Disjoint(%p+%d, %p+%d) = %v, want %v", tc.a, len(tc.a), tc.b, len(tc.b), got, tc.want)
		}
	}
}

func TestCutFor(t *testing.T) {
	for _, tc := range []struct{ size, sharers, want int }{
		{0, 1, defaultCut}, {-1, 4, defaultCut}, {32 << 20, 1, 8 << 20}, {32 << 20, 2, 4 << 20},
		{32 << 20, 8, minCut}, {32 << 20, 0, 8 << 20}, {2 << 20, 1, minCut}, {1 << 30, 1, maxCut}, {24 << 20, 2, 3 << 20},
	} {
		if got := cutFor(tc.size, tc.sharers); got != tc.want {
			t.Errorf("cutFor(%d, %d) = %d, want %d", tc.size, tc.sharers, got, tc.want)
		}
	}
}

// BenchmarkCopy compares Copy with the built-in copy on warm buffers (go test -bench Copy ./internal/mem).
func BenchmarkCopy(b *testing.B) {
	for _, n := range []int{256 << 10, 1 << 20, 4 << 20, 16 << 20} {
		src, dst := make([]byte, n), make([]byte, n)
		for i := range src { // written: untouched pages all map the kernel's one zero page
			src[i], dst[i] = byte(i), byte(i>>8)
		}
		for _, c := range []struct {
			name string
			f    func([]byte, []byte) int
		}{{"builtin", func(d, s []byte) int { return copy(d, s) }}, {"Copy", Copy}} {
			f := c.f
			b.Run(fmt.Sprintf("%s/%dKiB", c.name, n>>10), func(b *testing.B) {
				b.SetBytes(int64(n))
				for b.Loop() {
					f(dst, src)
				}
			})
		}
	}
}
