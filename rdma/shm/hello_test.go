//go:build linux

package shm

import (
	"testing"
)

func helloBytes(h hello) []byte {
	var b [helloSize]byte
	h.put(&b)
	return b[:]
}

// TestParseHello: a hello round-trips; one of another size, magic, node, CMA flag or with no ring is refused.
func TestParseHello(t *testing.T) {
	good := hello{node: 3, ringOff: 4096, ringLen: 1 << 20, probe: 0xc000123456, probeVal: 42, cma: true}
	if h, err := parseHello(helloBytes(good), 3); err != nil || h != good {
		t.Fatalf("round trip: %+v, %v; want %+v", h, err, good)
	}
	bad := map[string][]byte{
		"short":       helloBytes(good)[:helloSize-1],
		"long":        append(helloBytes(good), 0),
		"from node 2": helloBytes(good),
	}
	b := helloBytes(good)
	b[0] ^= 1
	bad["magic"] = b
	b = helloBytes(good)
	b[48] = 2
	bad["cma flag 2"] = b
	g := good
	g.ringLen = 0
	bad["no ring"] = helloBytes(g)
	g = good
	g.ringOff = -4096
	bad["ring before the segment"] = helloBytes(g)
	for name, b := range bad {
		node := 3
		if name == "from node 2" {
			node = 2
		}
		if _, err := parseHello(b, node); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseHello: a hello comes from another process. Parsing never panics, and what it accepts is what put
// writes for the fields it returned, but for the reserved bytes.
func FuzzParseHello(f *testing.F) {
	f.Add(helloBytes(hello{node: 1, ringOff: 4096, ringLen: 1 << 20, probe: 1, probeVal: 2, cma: true}))
	f.Add(helloBytes(hello{node: 1, ringOff: 1 << 62, ringLen: 1 << 62}))
	f.Add(make([]byte, helloSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHello(b, 1)
		if err != nil {
			return
		}
		re := helloBytes(h)
		for i := range b {
			if reserved := i >= 12 && i < 16 || i >= 49; !reserved && b[i] != re[i] {
				t.Fatalf("accepted %x as %+v, which is %x", b, h, re)
			}
		}
	})
}
