//go:build linux

package netdev

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/gompj/gompj/device"
)

func fuzzLimits() *limits {
	return &limits{ranks: 4, nodeOf: func(r int) int { return r / 2 }, self: 0, peer: 1,
		maxEager: 1024, maxData: 4096, maxMessage: 1 << 20}
}

// seedFrames are valid and near-valid frames for the seed corpora.
func seedFrames() [][]byte {
	hs := []device.Header{
		{Kind: device.KindEager, Source: 2, Dest: 0, Tag: 5, Context: 1, Length: 3, Seq: 1},
		{Kind: device.KindEager, Flags: device.FlagSync, Source: 3, Dest: 1, Length: 0, Seq: 3},
		{Kind: device.KindRTS, Source: 2, Dest: 1, Length: 100, Seq: 7},
		{Kind: device.KindCTS, Source: 0, Dest: 2, Length: 50, Seq: 1},
		{Kind: device.KindData, Source: 2, Dest: 0, Length: 100, Seq: 7},
		{Kind: device.KindAck, Source: 1, Dest: 3, Seq: 3},
		{Kind: kindCredit, Source: -1, Dest: -1},
		{Kind: kindBye, Source: -1, Dest: -1},
		{Kind: device.KindEager, Source: 0, Dest: 2, Length: 3},         // wrong direction
		{Kind: device.KindEager, Source: 2, Dest: 0, Length: 5000},      // over the limit
		{Kind: device.KindData, Source: 2, Dest: 0, Length: 5, Seq: 99}, // unknown message
	}
	var out [][]byte
	for i := range hs {
		b := make([]byte, HeaderSize, HeaderSize+int(payloadLen(&hs[i])))
		putHeader(b, &hs[i], uint32(i))
		if n := payloadLen(&hs[i]); n <= 200 {
			b = append(b, bytes.Repeat([]byte{byte(i)}, int(n))...)
		}
		out = append(out, b)
	}
	return out
}

func FuzzDecodeHeader(f *testing.F) {
	for _, b := range seedFrames() {
		f.Add(b[:HeaderSize])
	}
	f.Add([]byte{})
	l := fuzzLimits()
	f.Fuzz(func(t *testing.T, b []byte) {
		h, credit, err := decodeHeader(b, l)
		if err != nil {
			return
		}
		// a header that decodes re-encodes to the same bytes
		re := make([]byte, HeaderSize)
		putHeader(re, &h, credit)
		if !bytes.Equal(re, b[:HeaderSize]) {
			t.Fatalf("decode/encode mismatch:\n%x\n%x", b[:HeaderSize], re)
		}
		if h.Kind == device.KindEager && h.Length > l.maxEager || h.Kind == device.KindData && h.Length > l.maxData ||
			payloadLen(&h) > l.maxMessage {
			t.Fatalf("accepted a kind %d frame with a payload of %d bytes", h.Kind, payloadLen(&h))
		}
	})
}

// offlineConn is a device with no sockets and a connection from node 1 whose tables expect: a CTS for seq 1,
// DATA for seq 7 (100 bytes), 8 and 9 (segmented, 100 bytes and 100 KiB), 10 (100 KiB), an ACK for seq 3.
func offlineConn(t testing.TB) (*Device, *conn, *sink) {
	s := newSink()
	d, err := newDevice(Config{Node: 0, Nodes: 2, Ranks: 4, NodeOf: func(r int) int { return r / 2 },
		Secret: testSecret, EagerLimit: 1024, ChunkSize: 64 << 10, MaxMessage: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.bind(s, [][]byte{nil, []byte("127.0.0.1:1")}); err != nil {
		t.Fatal(err)
	}
	p := d.peers[1]
	p.rdvSend[1] = &rdvSend{h: device.Header{Kind: device.KindRTS, Source: 0, Dest: 2, Length: 50, Seq: 1}, payload: device.Contiguous(make([]byte, 50))}
	p.rdvRecv[7] = &rdvRecv{h: device.Header{Kind: device.KindRTS, Source: 2, Dest: 1, Length: 100, Seq: 7}, dst: device.Contiguous(make([]byte, 100))}
	// segmented destinations: tiny pieces (through the read buffer) and large ones (readv)
	p.rdvRecv[8] = &rdvRecv{h: device.Header{Kind: device.KindRTS, Source: 2, Dest: 1, Length: 100, Seq: 8},
		dst: device.Payload{Segs: &stridedPieces{buf: make([]byte, 300), blk: 3, stride: 7}, Len: 100}}
	p.rdvRecv[9] = &rdvRecv{h: device.Header{Kind: device.KindRTS, Source: 2, Dest: 1, Length: 100 << 10, Seq: 9},
		dst: device.Payload{Segs: &stridedPieces{buf: make([]byte, 300<<10), blk: 20 << 10, stride: 30 << 10}, Off: 5, Len: 100 << 10}, direct: true}
	// a large contiguous destination: DATA frames of 16 KiB or more are read straight into it
	p.rdvRecv[10] = &rdvRecv{h: device.Header{Kind: device.KindRTS, Source: 2, Dest: 1, Length: 100 << 10, Seq: 10},
		dst: device.Contiguous(make([]byte, 100<<10))}
	p.syncWait[3] = &syncEntry{h: device.Header{Source: 1, Dest: 3, Seq: 3}, done: completerFunc(func(error) {})}
	return d, p.slots[0], s
}

// FuzzStream feeds arbitrary bytes, in arbitrary pieces, through a connection's read state machine and the
// device's frame handling (see stream). It must never panic or read past what it was given, and what it rejects is
// an error wrapping ErrFrame.
func FuzzStream(f *testing.F) {
	frames := seedFrames()
	var all []byte
	for _, b := range frames[:9] {
		all = append(all, b...)
	}
	f.Add(all, uint16(7))
	f.Add(frames[4], uint16(1))
	for _, b := range frames {
		f.Add(b, uint16(40))
	}
	f.Fuzz(stream)
}

// FuzzStreamDirect is FuzzStream from DATA frames large enough (directMin) to be read straight into their
// destination, contiguous (direct) or segmented (directv). Its inputs are tens of KiB, which slows a fuzzer down:
// hence a target of its own, which leaves FuzzStream fast.
func FuzzStreamDirect(f *testing.F) {
	for _, seq := range []uint64{9, 10} {
		h := device.Header{Kind: device.KindData, Source: 2, Dest: 1, Length: directMin + 4<<10, Seq: seq}
		b := make([]byte, HeaderSize, HeaderSize+int(h.Length))
		putHeader(b, &h, 0)
		b = append(b, bytes.Repeat([]byte{byte(seq)}, int(h.Length))...)
		f.Add(b, uint16(96))
		f.Add(b, uint16(0x8000|96))
	}
	f.Fuzz(stream)
}

// stream feeds data to an offline connection in pieces of at most piece%97+1 bytes, the way the read loop does:
// straight into a large payload's destination when the state machine offers one (direct, directv), else through
// the read buffer. With piece's top bit set, a direct read takes all it can, as a read that fills its destination.
func stream(t *testing.T, data []byte, piece uint16) {
	_, c, _ := offlineConn(t)
	step := int(piece)%97 + 1
	for len(data) > 0 {
		n := min(step, len(data))
		var err error
		if pl, ok := c.rx.directv(); ok {
			if piece&0x8000 != 0 {
				n = len(data)
			}
			n = min(n, pl.Len)
			pl.Scatter(0, data[:n])
			err = c.rx.advanceDirect(n, c)
		} else if dst := c.rx.direct(); dst != nil {
			if piece&0x8000 != 0 {
				n = len(data)
			}
			n = copy(dst, data[:n])
			err = c.rx.advanceDirect(n, c)
		} else {
			sp := c.rx.space()
			n = min(n, len(sp))
			copy(sp, data[:n])
			c.rx.w += n
			err = c.rx.parse(&c.lim, c)
		}
		data = data[n:]
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("an error that is not ErrFrame: %v", err)
			}
			return
		}
		if c.rx.r > c.rx.w || c.rx.w > len(c.rx.buf) || c.rx.inPayload && c.rx.got > c.rx.target.size() {
			t.Fatalf("read state out of bounds: r %d w %d, %d of a payload of %d", c.rx.r, c.rx.w, c.rx.got,
				c.rx.target.size())
		}
	}
}

//go:generate go test -run ^TestSeedCorpus$ -update-corpus .

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the committed seed corpora from seedFrames (go generate)")

// TestSeedCorpus: the committed seed corpora of FuzzDecodeHeader and FuzzStream, and the frame fixtures in
// ../testdata/netdev/frames, are what seedFrames makes, and nothing else. When the frame format or the seeds change, `go generate
// ./netdev` rewrites them (this test with -update-corpus), and this test fails until someone does.
func TestSeedCorpus(t *testing.T) {
	files := map[string][]byte{}
	for i, b := range seedFrames() {
		name := "seed" + string(rune('a'+i))
		files[filepath.Join("testdata", "fuzz", "FuzzDecodeHeader", name)] =
			[]byte("go test fuzz v1\n[]byte(" + quote(b[:HeaderSize]) + ")\n")
		files[filepath.Join("testdata", "fuzz", "FuzzStream", name)] =
			[]byte("go test fuzz v1\n[]byte(" + quote(b) + ")\nuint16(13)\n")
		files[filepath.Join("..", "testdata", "netdev", "frames", "frame-"+string(rune('a'+i))+".bin")] = b
	}
	// Files in those directories that seedFrames no longer makes (a seed was dropped) are stale.
	for _, dir := range []string{filepath.Join("testdata", "fuzz", "FuzzDecodeHeader"),
		filepath.Join("testdata", "fuzz", "FuzzStream"), filepath.Join("..", "testdata", "netdev", "frames")} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			if _, ok := files[path]; ok {
				continue
			}
			if *updateCorpus {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				continue
			}
			t.Errorf("%s is not one seedFrames makes: run go generate ./netdev", path)
		}
	}
	for path, want := range files {
		if *updateCorpus {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not what seedFrames makes (%v): run go generate ./netdev", path, err)
		}
	}
}

func quote(b []byte) string {
	var sb bytes.Buffer
	sb.WriteByte('"')
	for _, c := range b {
		sb.WriteString("\\x")
		sb.WriteByte("0123456789abcdef"[c>>4])
		sb.WriteByte("0123456789abcdef"[c&15])
	}
	sb.WriteByte('"')
	return sb.String()
}

// stridedPieces is a segmented buffer for tests: blocks of blk bytes, stride bytes apart, over buf.
type stridedPieces struct {
	buf         []byte
	blk, stride int
}

func (s *stridedPieces) Pieces(off, max int, dst [][]byte) int {
	n := 0
	for max > 0 && n < len(dst) {
		b, in := off/s.blk, off%s.blk
		start := b*s.stride + in
		if start >= len(s.buf) {
			break
		}
		k := min(s.blk-in, max, len(s.buf)-start)
		dst[n] = s.buf[start : start+k]
		n++
		off, max = off+k, max-k
	}
	return n
}
