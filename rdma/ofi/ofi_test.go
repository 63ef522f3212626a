//go:build ofi

package ofi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/gompj/gompj/rdma"
)

// The fabrics the tests run over: libfabric's own providers, which need no hardware. GOMPJ_OFI_TEST_PROVIDERS
// (comma-separated, e.g. "verbs;ofi_rxm") runs them over others.
type fabricCase struct {
	prov, api string
}

func fabricCases(t *testing.T) []fabricCase {
	provs := []string{"tcp;ofi_rxm", "shm"}
	if s := os.Getenv("GOMPJ_OFI_TEST_PROVIDERS"); s != "" {
		provs = strings.Split(s, ",")
	}
	var out []fabricCase
	for _, p := range provs {
		for _, api := range []string{"tagged", "msg"} {
			out = append(out, fabricCase{p, api})
		}
	}
	return out
}

func eachFabric(t *testing.T, f func(t *testing.T, fc fabricCase)) {
	for _, fc := range fabricCases(t) {
		t.Run(strings.ReplaceAll(fc.prov, ";", "+")+"/"+fc.api, func(t *testing.T) {
			if _, err := New(Options{Provider: fc.prov, API: fc.api}).choose(); err != nil {
				t.Skipf("not here: %v", err)
			}
			f(t, fc)
		})
	}
}

// tnode is one endpoint of a test job with a pool of posted receive buffers.
type tnode struct {
	t     *testing.T
	id    int
	ep    *endpoint
	slab  []byte
	mr    rdma.MR
	size  int
	nbuf  int
	cs    []rdma.Completion
	recvs []recvd
}

type recvd struct {
	from int
	data []byte
}

const tbuf = 16 << 10

// openJob opens n endpoints of one job, connects them all and waits until they are ready.
func openJob(t *testing.T, fc fabricCase, n int, o Options) []*tnode {
	t.Helper()
	o.Provider, o.API = fc.prov, fc.api
	p := New(o)
	nodes := make([]*tnode, n)
	for i := range nodes {
		ep, err := p.Open(rdma.EndpointConfig{Node: i, Nodes: n, Secret: []byte("test job")})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = &tnode{t: t, id: i, ep: ep.(*endpoint), size: tbuf, nbuf: 64, cs: make([]rdma.Completion, 16)}
	}
	t.Cleanup(func() { closeAll(t, nodes) })
	for _, x := range nodes {
		for _, y := range nodes {
			if x != y {
				if err := x.ep.Connect(y.id, y.ep.Address()); err != nil {
					t.Fatal(err)
				}
			}
		}
		x.postAll()
	}
	errs := make(chan error, n)
	for _, x := range nodes {
		go func() { errs <- x.ep.Ready(20 * time.Second) }()
	}
	for range nodes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// closeAll closes endpoints at once: each takes the others' goodbyes while it waits for its own to be taken
// (libfabric's shm frees what a peer in the same process would still touch once an endpoint is closed).
func closeAll(t *testing.T, nodes []*tnode) {
	var wg sync.WaitGroup
	for _, x := range nodes {
		wg.Go(func() {
			if err := x.ep.Close(); err != nil {
				t.Errorf("node %d: close: %v", x.id, err)
			}
		})
	}
	wg.Wait()
}

func (x *tnode) postAll() {
	x.t.Helper()
	if x.slab == nil {
		x.slab = make([]byte, x.size*x.nbuf)
		mr, err := x.ep.Register(x.slab, rdma.AccessLocal)
		if err != nil {
			x.t.Fatal(err)
		}
		x.mr = mr
	}
	for i := range x.nbuf {
		x.post(i)
	}
}

func (x *tnode) post(i int) {
	x.t.Helper()
	if err := x.ep.PostRecv(x.slab[i*x.size:(i+1)*x.size], x.mr, uint64(i)); err != nil {
		x.t.Fatalf("node %d: posting receive %d: %v", x.id, i, err)
	}
}

// poll polls once: receives are copied out and their buffers posted again; the other completions are returned.
func (x *tnode) poll() []rdma.Completion {
	x.t.Helper()
	n, err := x.ep.Poll(x.cs)
	if err != nil {
		x.t.Fatalf("node %d: poll: %v", x.id, err)
	}
	var out []rdma.Completion
	for _, c := range x.cs[:n] {
		if c.Op == rdma.OpRecv {
			if c.Err == nil {
				b := x.slab[int(c.Ctx)*x.size:]
				x.recvs = append(x.recvs, recvd{c.Node, append([]byte(nil), b[:c.Len]...)})
			}
			x.post(int(c.Ctx))
			if c.Err == nil {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// until polls all nodes until cond holds, failing after a generous bound.
func until(t *testing.T, nodes []*tnode, what string, cond func() bool, each func(x *tnode, cs []rdma.Completion)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		for _, x := range nodes {
			cs := x.poll()
			if each != nil {
				each(x, cs)
			} else {
				for _, c := range cs {
					if c.Err != nil || c.Op == rdma.OpPeerLost || c.Op == rdma.OpPeerClosed {
						t.Fatalf("node %d: unexpected completion %+v", x.id, c)
					}
				}
			}
		}
	}
}

func message(from, seq, size int) []byte {
	b := make([]byte, size)
	if size >= 8 {
		binary.LittleEndian.PutUint32(b, uint32(from))
		binary.LittleEndian.PutUint32(b[4:], uint32(seq))
	}
	for i := 8; i < size; i++ {
		b[i] = byte(from*31 + seq*7 + i)
	}
	return b
}

// TestOrderAndInject: every node sends to every other a stream of messages of many sizes, small ones injected
// and the others sent from registered bounce buffers; each receiver gets each stream whole and in order, and
// every send completes once with its context.
func TestOrderAndInject(t *testing.T) {
	eachFabric(t, func(t *testing.T, fc fabricCase) {
		const n, per = 3, 300
		nodes := openJob(t, fc, n, Options{})
		sizes := []int{8, 9, 40, 64, 100, 1000, 4096, tbuf}
		type out struct {
			slab   []byte
			mr     rdma.MR
			free   []int
			done   map[uint64]bool
			posted int
		}
		outs := make([]*out, n)
		for i, x := range nodes {
			o := &out{slab: make([]byte, 32*tbuf), done: map[uint64]bool{}}
			mr, err := x.ep.Register(o.slab, rdma.AccessLocal)
			if err != nil {
				t.Fatal(err)
			}
			o.mr = mr
			for b := range 32 {
				o.free = append(o.free, b)
			}
			outs[i] = o
		}
		next := make([][]int, n) // next[from][to]: the next sequence number to send
		for i := range next {
			next[i] = make([]int, n)
		}
		inj := nodes[0].ep.Caps().InjectSize
		want := n * (n - 1) * per
		recvCount := func() int {
			s := 0
			for _, x := range nodes {
				s += len(x.recvs)
			}
			return s
		}
		agains := 0
		until(t, nodes, "every message", func() bool { return recvCount() == want }, func(x *tnode, cs []rdma.Completion) {
			o := outs[x.id]
			for _, c := range cs {
				if c.Err != nil || c.Op != rdma.OpSend {
					t.Fatalf("node %d: %+v", x.id, c)
				}
				if o.done[c.Ctx] {
					t.Fatalf("node %d: send %d completed twice", x.id, c.Ctx)
				}
				o.done[c.Ctx] = true
				o.free = append(o.free, int(c.Ctx%32))
			}
			for to := range n {
				if to == x.id || next[x.id][to] == per {
					continue
				}
				seq := next[x.id][to]
				m := message(x.id, seq, sizes[(seq+to)%len(sizes)])
				var err error
				if len(m) <= inj && seq%2 == 0 {
					err = x.ep.Inject(to, m[:8], m[8:])
				} else {
					if len(o.free) == 0 {
						continue
					}
					b := o.free[len(o.free)-1]
					buf := o.slab[b*tbuf : b*tbuf+len(m)]
					copy(buf, m)
					ctx := uint64(o.posted*32 + b)
					if err = x.ep.Send(to, buf, o.mr, ctx); err == nil {
						o.free = o.free[:len(o.free)-1]
						o.posted++
					}
				}
				switch {
				case err == rdma.ErrAgain:
					agains++
				case err != nil:
					t.Fatalf("node %d to %d: %v", x.id, to, err)
				default:
					next[x.id][to]++
				}
			}
		})
		for _, x := range nodes {
			seen := make([]int, n)
			for _, r := range x.recvs {
				if len(r.data) < 8 {
					t.Fatalf("node %d: a message of %d bytes", x.id, len(r.data))
				}
				from, seq := int(binary.LittleEndian.Uint32(r.data)), int(binary.LittleEndian.Uint32(r.data[4:]))
				if from != r.from {
					t.Fatalf("node %d: message of node %d reported from %d", x.id, from, r.from)
				}
				if seq != seen[from] {
					t.Fatalf("node %d: from node %d message %d where %d was due", x.id, from, seq, seen[from])
				}
				if w := message(from, seq, sizes[(seq+x.id)%len(sizes)]); string(w) != string(r.data) {
					t.Fatalf("node %d: message %d of node %d garbled (%d bytes, want %d)", x.id, seq, from, len(r.data), len(w))
				}
				seen[from]++
			}
		}
		t.Logf("%d messages, %d FI_EAGAIN", want, agains)
	})
}

// TestRMA: Write and Read with keys through MR.Addr, checked in the target's memory when the completion comes; a
// wrong key and an address outside the registration complete with errors naming the call and the peer.
func TestRMA(t *testing.T) {
	eachFabric(t, func(t *testing.T, fc fabricCase) {
		nodes := openJob(t, fc, 2, Options{})
		a, b := nodes[0], nodes[1]
		if !a.ep.Caps().RMA {
			t.Skip("no FI_RMA")
		}
		const size = 1 << 20
		remote := make([]byte, size)
		for i := range remote {
			remote[i] = byte(i * 13)
		}
		rmr, err := b.ep.Register(remote, rdma.AccessRemoteRead|rdma.AccessRemoteWrite|rdma.AccessLocal)
		if err != nil {
			t.Fatal(err)
		}
		local := make([]byte, size)
		lmr, err := a.ep.Register(local, rdma.AccessLocal)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []rdma.Completion
		wait := func(what string, k int) []rdma.Completion {
			t.Helper()
			until(t, nodes, what, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= k }, func(x *tnode, cs []rdma.Completion) {
				for _, c := range cs {
					if x != a {
						t.Fatalf("node %d: %+v", x.id, c)
					}
					mu.Lock()
					got = append(got, c)
					mu.Unlock()
				}
			})
			out := got
			got = nil
			return out
		}
		// Read the second half of remote into local's first half.
		off := size / 2
		raddr := rmr.Addr(unsafeAt(remote, off))
		if err := a.ep.Read(1, local[:off], lmr, raddr, rmr.Key(), 7); err != nil {
			t.Fatal(err)
		}
		cs := wait("read", 1)
		if cs[0].Op != rdma.OpRead || cs[0].Ctx != 7 || cs[0].Node != 1 || cs[0].Err != nil {
			t.Fatalf("read completion %+v", cs[0])
		}
		if string(local[:off]) != string(remote[off:]) {
			t.Fatal("read brought other bytes")
		}
		// Write a pattern into remote at 1000; the completion means it is there.
		for i := range local {
			local[i] = byte(i * 7)
		}
		if err := a.ep.Write(1, local[5:5+300000], lmr, rmr.Addr(unsafeAt(remote, 1000)), rmr.Key(), 8); err != nil {
			t.Fatal(err)
		}
		cs = wait("write", 1)
		if cs[0].Op != rdma.OpWrite || cs[0].Ctx != 8 || cs[0].Err != nil {
			t.Fatalf("write completion %+v", cs[0])
		}
		if string(remote[1000:1000+300000]) != string(local[5:5+300000]) {
			t.Fatal("the write's data is not in the target's memory at its completion")
		}
		// Without a registration (no FI_MR_LOCAL here) the buffer is pinned for the transfer.
		if !a.ep.Caps().LocalMR {
			plain := make([]byte, 4096)
			if err := a.ep.Read(1, plain, nil, raddr, rmr.Key(), 9); err != nil {
				t.Fatal(err)
			}
			if cs = wait("read into unregistered memory", 1); cs[0].Err != nil || string(plain) != string(remote[off:off+4096]) {
				t.Fatalf("%+v", cs[0])
			}
		}
		// A wrong key, and bytes beyond the registration. (libfabric 1.17's shm stops taking commands from a peer
		// whose transfer failed, so the peer would only be reported lost after the loss timeout; tcp breaks the
		// connection, which fails every transfer under way: the device gives up on such a peer either way.)
		if fc.prov != "shm" {
			if err := a.ep.Read(1, local[:100], lmr, raddr, rmr.Key()+12345, 10); err != nil {
				t.Fatal(err)
			}
			if err := a.ep.Write(1, local[:100], lmr, rmr.Addr(unsafeAt(remote, size-50)), rmr.Key(), 11); err != nil {
				t.Fatal(err)
			}
			cs = wait("failed transfers", 2)
			for _, c := range cs {
				var oe *rdma.OpError
				if c.Err == nil || !errors.As(c.Err, &oe) || oe.Node != 1 || c.Node != 1 ||
					!strings.Contains(c.Err.Error(), "node 1") || !strings.Contains(c.Err.Error(), "fi_") {
					t.Fatalf("bad transfer completed as %+v", c)
				}
				t.Logf("ctx %d: %v", c.Ctx, c.Err)
			}
		}
		if err := rmr.Close(); err != nil {
			t.Fatal(err)
		}
		if err := rmr.Close(); err == nil {
			t.Fatal("a registration closed twice")
		}
	})
}

// TestBackPressure: a sender that never reaps its completions fills the provider's queues: FI_EAGAIN comes back
// as rdma.ErrAgain itself, and once both sides poll, everything sent arrives in order.
func TestBackPressure(t *testing.T) {
	eachFabric(t, func(t *testing.T, fc fabricCase) {
		nodes := openJob(t, fc, 2, Options{})
		a, b := nodes[0], nodes[1]
		// Each send owns its buffer until it completes: one slice of the slab per send.
		const max, size = 16 << 10, 256
		slab := make([]byte, max*size)
		mr, err := a.ep.Register(slab, rdma.AccessLocal)
		if err != nil {
			t.Fatal(err)
		}
		sent := 0
		for ; sent < max; sent++ {
			buf := slab[sent*size : (sent+1)*size]
			binary.LittleEndian.PutUint32(buf, uint32(sent))
			err := a.ep.Send(1, buf, mr, uint64(sent))
			if err == rdma.ErrAgain {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if sent == max {
			t.Fatalf("%d sends never reaped and never FI_EAGAIN", max)
		}
		t.Logf("FI_EAGAIN after %d sends", sent)
		completed := 0
		until(t, nodes, "the backlog", func() bool { return len(b.recvs) == sent && completed == sent }, func(x *tnode, cs []rdma.Completion) {
			for _, c := range cs {
				if c.Op != rdma.OpSend || c.Err != nil {
					t.Fatalf("%+v", c)
				}
				completed++
			}
		})
		for i, r := range b.recvs {
			if got := binary.LittleEndian.Uint32(r.data); int(got) != i || len(r.data) != size {
				t.Fatalf("message %d carries %d (%d bytes)", i, got, len(r.data))
			}
		}
	})
}

// TestTruncated: a message longer than the receive it lands in completes that receive with an error naming the
// sender and the call, and the endpoint goes on.
func TestTruncated(t *testing.T) {
	eachFabric(t, func(t *testing.T, fc fabricCase) {
		if fc.prov == "shm" {
			// libfabric 1.17's shm spins in fi_cq_read on a truncated message over its inject size. The rdma
			// device never sends a peer more than its receive buffers hold (their size is in its address).
			t.Skip("libfabric shm hangs on truncation")
		}
		nodes := openJob(t, fc, 2, Options{})
		a, b := nodes[0], nodes[1]
		big := make([]byte, tbuf+100)
		var errc *rdma.Completion
		if err := a.ep.Send(1, big, nil, 1); err != nil {
			t.Fatal(err)
		}
		until(t, nodes, "the truncation", func() bool { return errc != nil }, func(x *tnode, cs []rdma.Completion) {
			for _, c := range cs {
				switch {
				case x == b && c.Op == rdma.OpRecv && c.Err != nil:
					errc = &c
				case x == a && c.Op == rdma.OpSend:
				default:
					t.Fatalf("node %d: %+v", x.id, c)
				}
			}
		})
		if errc.Node != 0 || !strings.Contains(errc.Err.Error(), "node 0") || !strings.Contains(errc.Err.Error(), "recv") {
			t.Fatalf("truncated receive: %+v", *errc)
		}
		t.Log(errc.Err)
		if err := a.ep.Inject(1, message(0, 0, 8), nil); err != nil {
			t.Fatal(err)
		}
		until(t, nodes, "a message after the truncation", func() bool { return len(b.recvs) == 1 }, func(x *tnode, cs []rdma.Completion) {})
	})
}

// TestStranger: a message from an endpoint this one never connected is dropped, its buffer posted again.
func TestStranger(t *testing.T) {
	eachFabric(t, func(t *testing.T, fc fabricCase) {
		nodes := openJob(t, fc, 2, Options{})
		b := nodes[1]
		// A third endpoint that claims to be node 0 of a job of 2: b knows node 0, but the word says it is
		// node 0 while the message comes from elsewhere; without FI_SOURCE it is taken at its word, so use a
		// node number b never connected instead: node 2 of 3.
		p := New(Options{Provider: fc.prov, API: fc.api, CloseTimeout: 100 * time.Millisecond})
		ep, err := p.Open(rdma.EndpointConfig{Node: 2, Nodes: 3, Secret: []byte("test job")})
		if err != nil {
			t.Fatal(err)
		}
		s := ep.(*endpoint)
		closed := make(chan error, 1)
		defer func() {
			// b keeps polling while the stranger closes: libfabric's shm must not see it touch a freed endpoint.
			go func() { closed <- s.Close() }()
			until(t, nodes, "the stranger's close", func() bool { return len(closed) == 1 }, nil)
		}()
		if err := s.Connect(1, b.ep.Address()); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			err := s.Inject(1, message(2, 0, 8), nil)
			if err == nil {
				break
			}
			if err != rdma.ErrAgain || time.Now().After(deadline) {
				t.Fatal(err)
			}
			cs := make([]rdma.Completion, 4)
			if n, err := s.Poll(cs); err != nil || n > 0 {
				t.Fatalf("stranger: %v %+v", err, cs[:n])
			}
			for _, x := range nodes {
				if cs := x.poll(); len(cs) > 0 {
					t.Fatalf("node %d: %+v", x.id, cs)
				}
			}
		}
		until(t, nodes, "the stranger's message", func() bool { return b.ep.dropped.Load() >= 1 }, nil)
		if len(b.recvs) != 0 {
			t.Fatalf("a stranger's message delivered: %+v", b.recvs)
		}
		// A header inside a struct that holds pointers (the device keeps one per peer): cgo must not refuse it.
		holder := struct {
			next *int
			hdr  [8]byte
		}{next: new(int)}
		copy(holder.hdr[:], message(0, 0, 8))
		if err := nodes[0].ep.Inject(1, holder.hdr[:], nil); err != nil {
			t.Fatal(err)
		}
		until(t, nodes, "the next message", func() bool { return len(b.recvs) == 1 }, nil)
		if string(b.recvs[0].data) != string(message(0, 0, 8)) {
			t.Fatalf("got %x", b.recvs[0].data)
		}
	})
}

// TestWaitWake: Wait returns at once on Wake, and when a message arrives, which it leaves for Poll.
func TestWaitWake(t *testing.T) {
	eachFabric(t, func(t *testing.T, fc fabricCase) {
		nodes := openJob(t, fc, 2, Options{})
		a, b := nodes[0], nodes[1]
		for b.ep.hasStash.Load() {
			b.poll()
		}
		done := make(chan struct{})
		go func() { b.ep.Wait(time.Minute); close(done) }()
		b.ep.Wake()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("Wake did not end Wait")
		}
		// Drain what the hellos and heartbeats left, then wait for a message sent while waiting.
		for len(b.poll()) > 0 {
		}
		done = make(chan struct{})
		go func() { b.ep.Wait(time.Minute); close(done) }()
		if err := a.ep.Inject(1, message(0, 0, 8), nil); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("a message did not end Wait")
		}
		until(t, nodes, "the message", func() bool { return len(b.recvs) == 1 }, nil)
	})
}

// TestHeartbeat: idle peers that poll stay alive far past the loss timeout.
func TestHeartbeat(t *testing.T) {
	eachFabric(t, func(t *testing.T, fc fabricCase) {
		nodes := openJob(t, fc, 3, Options{Heartbeat: 20 * time.Millisecond, LossTimeout: 400 * time.Millisecond})
		end := time.Now().Add(1500 * time.Millisecond)
		until(t, nodes, "the idle time", func() bool { return time.Now().After(end) }, nil)
	})
}

// TestAnotherJob: a node of another job (another secret) is refused by Ready and reported lost.
func TestAnotherJob(t *testing.T) {
	eachFabric(t, func(t *testing.T, fc fabricCase) {
		p := New(Options{Provider: fc.prov, API: fc.api})
		var eps [2]*endpoint
		for i := range eps {
			ep, err := p.Open(rdma.EndpointConfig{Node: i, Nodes: 2, Secret: []byte(fmt.Sprint("job ", i))})
			if err != nil {
				t.Fatal(err)
			}
			eps[i] = ep.(*endpoint)
		}
		nodes := []*tnode{{t: t, id: 0, ep: eps[0], size: 256, nbuf: 8, cs: make([]rdma.Completion, 8)},
			{t: t, id: 1, ep: eps[1], size: 256, nbuf: 8, cs: make([]rdma.Completion, 8)}}
		defer closeAll(t, nodes)
		for i, x := range nodes {
			if err := x.ep.Connect(1-i, eps[1-i].Address()); err != nil {
				t.Fatal(err)
			}
			x.postAll()
		}
		// Both keep polling until both are done: the one that learns first must still say its own hello.
		errs := make(chan error, 2)
		for _, x := range nodes {
			go func() { errs <- x.ep.Ready(20 * time.Second) }()
		}
		lost := 0
		until(t, nodes, "both Ready and both losses", func() bool { return len(errs) == 2 && lost == 2 }, func(x *tnode, cs []rdma.Completion) {
			for _, c := range cs {
				if c.Op != rdma.OpPeerLost || c.Node != 1-x.id || !strings.Contains(c.Err.Error(), "another job") {
					t.Fatalf("node %d: %+v", x.id, c)
				}
				lost++
			}
		})
		for range 2 {
			if err := <-errs; err == nil || !strings.Contains(err.Error(), "another job") {
				t.Fatalf("ready with another job's node: %v", err)
			}
		}
	})
}

// TestConnectChecks: addresses are checked before libfabric sees them, and calls on a closed endpoint fail.
func TestConnectChecks(t *testing.T) {
	p := New(Options{Provider: "tcp;ofi_rxm"})
	ep, err := p.Open(rdma.EndpointConfig{Node: 0, Nodes: 3})
	if err != nil {
		t.Skip(err)
	}
	other, _ := encodeAddr(addrInfo{tagged: true, format: ep.(*endpoint).self.format, prov: "shm", name: make([]byte, 16)})
	for _, c := range []struct {
		node int
		addr []byte
		want string
	}{
		{0, ep.Address(), "this is node 0"},
		{3, ep.Address(), "of 3"},
		{1, []byte("junk"), "not an ofi address"},
		{1, other, "provider"},
	} {
		if err := ep.Connect(c.node, c.addr); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("connect node %d: %v, want %q", c.node, err, c.want)
		}
	}
	if err := ep.Send(1, []byte("x"), nil, 0); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Errorf("send to a node not connected: %v", err)
	}
	if err := ep.Inject(1, make([]byte, 5000), nil); err == nil {
		t.Error("inject over the inject size")
	}
	q := New(Options{Provider: "tcp;ofi_rxm"})
	ep2, err := q.Open(rdma.EndpointConfig{Node: 1, Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	mr2, err := ep2.Register(make([]byte, 64), rdma.AccessLocal)
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.Connect(1, ep2.Address()); err != nil {
		t.Fatal(err)
	}
	if err := ep.Connect(1, ep2.Address()); err == nil {
		t.Error("connected twice")
	}
	if err := ep.Send(1, make([]byte, 8), mr2, 0); err == nil || !strings.Contains(err.Error(), "another endpoint") {
		t.Errorf("send with another endpoint's registration: %v", err)
	}
	mine := make([]byte, 64)
	mr, err := ep.Register(mine[:32], rdma.AccessLocal)
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.Send(1, mine[16:48], mr, 0); err == nil || !strings.Contains(err.Error(), "inside its registration") {
		t.Errorf("send of a buffer beyond its registration: %v", err)
	}
	ep2.Close()
	if err := ep.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mr.Close(); err != nil {
		t.Errorf("closing a registration after its endpoint: %v", err)
	}
	if err := ep.Send(1, mine, nil, 0); err == nil {
		t.Error("send on a closed endpoint")
	}
	if err := ep.PostRecv(mine, nil, 0); err == nil {
		t.Error("receive on a closed endpoint")
	}
	if _, err := ep.Poll(make([]rdma.Completion, 4)); err == nil {
		t.Error("poll on a closed endpoint")
	}
	if _, err := ep.Register(mine, rdma.AccessLocal); err == nil {
		t.Error("register on a closed endpoint")
	}
	ep.Wait(time.Second) // returns at once
	ep.Wake()
	if err := ep.Close(); err != nil {
		t.Error("second close:", err)
	}
}

func TestSummary(t *testing.T) {
	s := Summary()
	if !strings.Contains(s, "libfabric 1.") || !strings.Contains(s, "tcp;ofi_rxm") {
		t.Fatalf("summary: %s", s)
	}
	t.Log(s)
}

func unsafeAt(b []byte, i int) unsafe.Pointer { return unsafe.Pointer(&b[i]) }
