package collectives

import (
	"testing"
	"unsafe"
)

func BenchmarkKernelSumFloat64(b *testing.B) {
	k, _ := kernelFor(Sum, kindOfElem(float64(0)))
	x, y := make([]float64, 4096/8), make([]float64, 4096/8)
	bx := unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4096)
	by := unsafe.Slice((*byte)(unsafe.Pointer(&y[0])), 4096)
	b.SetBytes(4096)
	for i := 0; i < b.N; i++ {
		k(bx, by)
	}
}
