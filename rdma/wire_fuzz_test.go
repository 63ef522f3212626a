package rdma

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/gompj/gompj/device"
)

func fuzzLimits() *limits {
	return &limits{ranks: 4, rankNode: []int32{0, 0, 1, 1}, self: 0, peer: 1, maxEager: 1024, maxData: 1024,
		maxMessage: 1 << 20}
}

func seedMessages() [][]byte {
	hs := []hdr{
		{Header: device.Header{Kind: device.KindEager, Source: 2, Dest: 0, Tag: 5, Context: 1, Length: 3, Seq: 1}, credit: 2},
		{Header: device.Header{Kind: device.KindEager, Flags: device.FlagSync, Source: 3, Dest: 1, Seq: 3}, pseq: 9},
		{Header: device.Header{Kind: device.KindRTS, Flags: flagRMA, Source: 2, Dest: 1, Length: 100, Seq: 7}, raddr: 0x1000, rkey: 42},
		{Header: device.Header{Kind: device.KindCTS, Flags: flagRMA, Source: 0, Dest: 2, Length: 50, Seq: 1}, raddr: 0x2000, rkey: 7, offset: 25},
		{Header: device.Header{Kind: device.KindData, Source: 2, Dest: 0, Length: 4, Seq: 7}, offset: 96},
		{Header: device.Header{Kind: device.KindAck, Source: 1, Dest: 3, Seq: 3}},
		{Header: device.Header{Kind: kindFin, Source: 0, Dest: 2, Length: 100, Seq: 7}},
		{Header: device.Header{Kind: kindWDone, Source: 2, Dest: 0, Length: 100, Seq: 7}},
		{Header: device.Header{Kind: kindCredit, Source: -1, Dest: -1}, credit: 5},
		{Header: device.Header{Kind: device.KindRTS, Flags: flagPieces, Source: 2, Dest: 1, Length: 100, Seq: 8}},
		{Header: device.Header{Kind: device.KindRTS, Flags: flagRMA | flagClaim, Source: 2, Dest: 1, Length: 1 << 17, Seq: 9},
			raddr: 0x1000, rkey: 42, offset: 3}, // a claim word for a split
		{Header: device.Header{Kind: device.KindEager, Source: 0, Dest: 2, Length: 3}},    // wrong direction
		{Header: device.Header{Kind: device.KindEager, Source: 2, Dest: 0, Length: 5000}}, // over the limit
		{Header: device.Header{Kind: device.KindCTS, Flags: flagPieces, Source: 0, Dest: 2, Length: 50, Seq: 1}},
		{Header: device.Header{Kind: device.KindRTS, Flags: flagPieces | flagRMA, Source: 2, Dest: 1, Length: 100, Seq: 8},
			raddr: 0x1000, rkey: 42}, // pieces and an address
		{Header: device.Header{Kind: device.KindCTS, Flags: flagRMA | flagClaim, Source: 0, Dest: 2, Length: 50, Seq: 1},
			raddr: 0x2000, rkey: 7, offset: 25}, // a claim on a CTS
		{Header: device.Header{Kind: device.KindRTS, Flags: flagClaim, Source: 2, Dest: 1, Length: 100, Seq: 8}, offset: 1}, // no rma
	}
	var out [][]byte
	for i := range hs {
		b := make([]byte, extHdrSize)
		n := hs[i].put(b)
		b = b[:n]
		if hs[i].Kind == device.KindEager || hs[i].Kind == device.KindData {
			b = append(b, bytes.Repeat([]byte{byte(i)}, int(min(hs[i].Length, 64)))...)
		}
		out = append(out, b)
	}
	return out
}

// FuzzDecode: any bytes from a peer decode to a valid message or an error naming the peer, never a panic; what
// decodes re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, b := range seedMessages() {
		f.Add(b)
	}
	f.Add([]byte{})
	l := fuzzLimits()
	f.Fuzz(func(t *testing.T, b []byte) {
		h, payload, err := decode(b, l)
		if err != nil {
			if !bytes.Contains([]byte(err.Error()), []byte("node 1")) {
				t.Fatalf("error does not name the peer: %v", err)
			}
			return
		}
		re := make([]byte, extHdrSize)
		n := h.put(re)
		if !bytes.Equal(re[:n], b[:n]) || !bytes.Equal(payload, b[n:]) {
			t.Fatalf("decode/encode mismatch:\n%x\n%x", b, re[:n])
		}
		if h.Kind == device.KindEager && h.Length > l.maxEager || h.Kind == device.KindData && h.Length > l.maxData ||
			(h.Kind == device.KindRTS || h.Kind == device.KindCTS) && h.Length > l.maxMessage {
			t.Fatalf("accepted a kind %d message of %d bytes", h.Kind, h.Length)
		}
		if h.Kind == device.KindCTS && h.offset > h.Length {
			t.Fatalf("accepted a CTS at offset %d of a message of %d bytes", h.offset, h.Length)
		}
	})
}

func TestSeedsDecode(t *testing.T) {
	l := fuzzLimits()
	for i, b := range seedMessages() {
		_, _, err := decode(b, l)
		if (err == nil) != (i < 11) {
			t.Errorf("seed %d: %v", i, err)
		}
	}
}

// FuzzParseAddress: a peer's address blob comes from another process through the job's bootstrap. Parsing never
// panics; what it accepts has the bounds Start relies on and is what Address writes for those fields.
func FuzzParseAddress(f *testing.F) {
	addr := func(v byte, eager, grant uint32, pa string) []byte {
		b := []byte{v, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.LittleEndian.PutUint32(b[1:], eager)
		binary.LittleEndian.PutUint32(b[5:], grant)
		return append(b, pa...)
	}
	f.Add(addr(addrVersion, 64<<10, 16, "shm-name"))
	f.Add(addr(addrVersion, 0, 16, "x"))
	f.Add(addr(addrVersion, 1<<31, 1<<31, "x"))
	f.Add(addr(addrVersion, 8, 1, ""))
	f.Add(addr(2, 8, 1, "x"))
	f.Fuzz(func(t *testing.T, a []byte) {
		eager, grant, pa, err := parseAddress(a)
		if err != nil {
			return
		}
		if eager <= 0 || eager > 1<<30 || grant <= 0 || grant > maxCredits || len(pa) == 0 {
			t.Fatalf("accepted an eager limit of %d, %d credits and a provider address of %d bytes", eager, grant, len(pa))
		}
		if !bytes.Equal(addr(addrVersion, uint32(eager), uint32(grant), string(pa)), a) {
			t.Fatalf("accepted %x as %d, %d, %x", a, eager, grant, pa)
		}
	})
}
