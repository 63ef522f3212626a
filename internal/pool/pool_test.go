package pool

import "testing"

type rec struct {
	n   int
	buf []byte
}

// Records come back zeroed, and a Put and Get at steady state allocate nothing.
func TestOf(t *testing.T) {
	var p Of[rec]
	r := p.Get()
	if r.n != 0 || r.buf != nil {
		t.Fatalf("new record %+v, want zero", *r)
	}
	r.n, r.buf = 7, make([]byte, 3)
	p.Put(r)
	if r.n != 0 || r.buf != nil {
		t.Fatalf("record given back holds %+v, want zero", *r)
	}
	for i := 0; i < 10; i++ { // warm up: the pool's per-P caches
		p.Put(p.Get())
	}
	if n := testing.AllocsPerRun(1000, func() { p.Put(p.Get()) }); n > 0 {
		t.Fatalf("%v allocations per Get and Put", n)
	}
}
