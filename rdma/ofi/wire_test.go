package ofi

import (
	"bytes"
	"strings"
	"testing"
)

func TestWord(t *testing.T) {
	for _, n := range []int{0, 1, 77, MaxNodes - 1} {
		if k, node, ok := parseWord(uint64(dataWord(n))); !ok || k != 0 || node != n {
			t.Fatalf("data word of node %d parsed as kind %d node %d ok %v", n, k, node, ok)
		}
		for kind := ctlHello; kind <= ctlAck; kind++ {
			if k, node, ok := parseWord(uint64(ctlWord(kind, n))); !ok || k != kind || node != n {
				t.Fatalf("control word %d of node %d parsed as kind %d node %d ok %v", kind, n, k, node, ok)
			}
		}
	}
	for _, w := range []uint64{1 << 32, 1 << 28, 5 << 28, wordCtl, wordCtl | 5<<kindShift, wordCtl | 7<<kindShift} {
		if _, _, ok := parseWord(w); ok {
			t.Errorf("word %#x accepted", w)
		}
	}
}

func TestHelloBye(t *testing.T) {
	d := secretDigest([]byte("job"))
	h := helloMsg(d)
	if err := checkHello(h, d); err != nil {
		t.Fatal(err)
	}
	if err := checkHello(h, secretDigest([]byte("other"))); err == nil || !strings.Contains(err.Error(), "another job") {
		t.Fatalf("another job's hello: %v", err)
	}
	for i := range h {
		b := bytes.Clone(h)
		b[i] ^= 0x40
		if checkHello(b, d) == nil {
			t.Errorf("hello with byte %d changed accepted", i)
		}
	}
	if checkHello(h[:15], d) == nil || checkHello(append(h, 0), d) == nil {
		t.Error("hello of the wrong length accepted")
	}
	if n, err := parseBye(byeMsg(12345)); err != nil || n != 12345 {
		t.Fatalf("bye: %d %v", n, err)
	}
	if _, err := parseBye(make([]byte, 7)); err == nil {
		t.Error("short bye accepted")
	}
}

func TestAddr(t *testing.T) {
	a := addrInfo{tagged: true, format: 2, prov: "tcp;ofi_rxm", name: bytes.Repeat([]byte{7}, 16)}
	b, err := encodeAddr(a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeAddr(b)
	if err != nil || got.tagged != a.tagged || got.format != a.format || got.prov != a.prov || !bytes.Equal(got.name, a.name) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if err := a.compatible(got); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		peer addrInfo
		want string
	}{
		{addrInfo{tagged: true, format: 2, prov: "shm", name: a.name}, "provider"},
		{addrInfo{tagged: false, format: 2, prov: a.prov, name: a.name}, "FI_MSG"},
		{addrInfo{tagged: true, format: 3, prov: a.prov, name: a.name}, "format"},
		{addrInfo{tagged: true, format: 2, prov: a.prov, name: a.name[:8]}, "8 bytes"},
	}
	for _, c := range bad {
		if err := a.compatible(c.peer); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.peer, err, c.want)
		}
	}
	s := addrInfo{format: fiAddrStr, prov: "x", name: []byte("fi_x://a\x00")}
	if err := s.compatible(addrInfo{format: fiAddrStr, prov: "x", name: []byte("unterminated")}); err == nil {
		t.Error("unterminated string address accepted")
	}
	if err := s.compatible(addrInfo{format: fiAddrStr, prov: "x", name: []byte("fi_x://longer-address\x00")}); err != nil {
		t.Error(err)
	}
	g := addrInfo{format: fiSockaddr, prov: "x", name: make([]byte, 16)}
	if g.compatible(addrInfo{format: fiSockaddr, prov: "x", name: make([]byte, 28)}) != nil ||
		g.compatible(addrInfo{format: fiSockaddr, prov: "x", name: make([]byte, 20)}) == nil {
		t.Error("generic socket addresses: 16 and 28 bytes only")
	}
	for i := 0; i < len(b); i++ {
		if _, err := decodeAddr(b[:i]); err == nil {
			t.Errorf("address cut at %d accepted", i)
		}
	}
	if _, err := encodeAddr(addrInfo{prov: strings.Repeat("p", 256), name: []byte{1}}); err == nil {
		t.Error("provider name of 256 bytes encoded")
	}
	if _, err := encodeAddr(addrInfo{prov: "p", name: make([]byte, maxAddr)}); err == nil {
		t.Error("address over 4 KiB encoded")
	}
}

// FuzzDecodeAddr: a peer's address blob comes from outside; decoding and checking it never panics, and what is
// accepted re-encodes to the same bytes.
func FuzzDecodeAddr(f *testing.F) {
	a, _ := encodeAddr(addrInfo{tagged: true, format: 2, prov: "tcp;ofi_rxm", name: make([]byte, 16)})
	f.Add(a)
	s, _ := encodeAddr(addrInfo{format: fiAddrStr, prov: "shm", name: []byte("fi_shm://1\x00")})
	f.Add(s)
	f.Add([]byte("GOFA"))
	self := addrInfo{tagged: true, format: 2, prov: "tcp;ofi_rxm", name: make([]byte, 16)}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeAddr(b)
		if err != nil {
			return
		}
		_ = self.compatible(got)
		_ = addrInfo{format: fiAddrStr, prov: got.prov, tagged: got.tagged}.compatible(got)
		again, err := encodeAddr(got)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %x re-encodes to %x (%v)", b, again, err)
		}
	})
}

// FuzzControl: control payloads come from peers.
func FuzzControl(f *testing.F) {
	d := secretDigest(nil)
	f.Add(helloMsg(d))
	f.Add(byeMsg(3))
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkHello(b, d) == nil && !bytes.Equal(b, helloMsg(d)) {
			t.Fatalf("hello %x accepted", b)
		}
		if n, err := parseBye(b); err == nil && !bytes.Equal(byeMsg(n), b) {
			t.Fatalf("bye %x read as %d", b, n)
		}
	})
}
