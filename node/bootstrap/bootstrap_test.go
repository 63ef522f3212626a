package bootstrap

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gompj/gompj/netdev/auth"
)

var secret = []byte("bootstrap-test-secret-0123456789")

func coordinator(t *testing.T, nodes int, timeout time.Duration) *Coordinator {
	t.Helper()
	c, err := NewCoordinator(CoordinatorConfig{Addr: "127.0.0.1:0", Nodes: nodes, Secret: secret, Timeout: timeout, HandshakeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ep is an endpoint on host "host" with a tcp address and a small shm blob.
func ep(tcp string) *Endpoint {
	var j byte
	fmt.Sscanf(tcp, "10.0.0.%d", &j)
	return &Endpoint{Host: "host", Addrs: map[string][]byte{"tcp": []byte(tcp), "shm": {0, j, 0xff}}}
}

func joinAll(t *testing.T, co *Coordinator, ids []int, nodes int) ([]*Client, []error) {
	t.Helper()
	cls := make([]*Client, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cls[i], errs[i] = Join(ClientConfig{Coordinator: co.Addr(), Node: id, Nodes: nodes, Self: *ep(fmt.Sprintf("10.0.0.%d:700%d", id, id)), Secret: secret, Timeout: 10 * time.Second})
		}()
	}
	wg.Wait()
	return cls, errs
}

func waitDone(t *testing.T, co *Coordinator) error {
	t.Helper()
	select {
	case <-co.done:
		return co.Wait()
	case <-time.After(10 * time.Second):
		t.Fatal("the coordinator did not finish")
		return nil
	}
}

func TestRegisterTableBarrierLeave(t *testing.T) {
	const n = 4
	co := coordinator(t, n, 10*time.Second)
	cls, errs := joinAll(t, co, []int{0, 1, 2, 3}, n)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	for i, cl := range cls {
		tab := cl.Table()
		if len(tab) != n {
			t.Fatalf("node %d got %d addresses", i, len(tab))
		}
		for j, a := range tab {
			if string(a.Addrs["tcp"]) != fmt.Sprintf("10.0.0.%d:700%d", j, j) || a.Host != "host" || len(a.Addrs) != 2 ||
				!bytes.Equal(a.Addrs["shm"], []byte{0, byte(j), 0xff}) {
				t.Fatalf("node %d: table[%d] = %+v", i, j, a)
			}
		}
	}
	for _, name := range []string{"start", "finalize", "start"} {
		var wg sync.WaitGroup
		for _, cl := range cls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := cl.Barrier(name, 10*time.Second); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	for _, cl := range cls {
		if err := cl.Leave(); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitDone(t, co); err != nil {
		t.Fatalf("clean job ended with %v", err)
	}
}

func TestBarrierWaitsForAll(t *testing.T) {
	co := coordinator(t, 2, 10*time.Second)
	cls, _ := joinAll(t, co, []int{0, 1}, 2)
	res := make(chan error, 1)
	go func() { res <- cls[0].Barrier("b", 10*time.Second) }()
	select {
	case err := <-res:
		t.Fatalf("barrier returned with one node of two: %v", err)
	case <-time.After(50 * time.Millisecond): // a failure guard, not synchronisation: nothing should happen
	}
	if err := cls[1].Barrier("b", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
}

// Node 1 never joins: once the registration timeout is over, the coordinator and the nodes that joined name it.
// The timeout (2 s) is generous, so that on a loaded machine both other joins are in by then; the time is logged.
func TestMissingNodeTimesOut(t *testing.T) {
	start := time.Now()
	co := coordinator(t, 3, 2*time.Second)
	_, errs := joinAll(t, co, []int{0, 2}, 3)
	for _, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "node(s) [1] never registered") {
			t.Fatalf("join: %v", err)
		}
	}
	err := waitDone(t, co)
	if err == nil || !strings.Contains(err.Error(), "[1]") {
		t.Fatalf("coordinator: %v", err)
	}
	t.Logf("after %v: %v", time.Since(start), err)
}

func TestNodeDeathNotifiesOthers(t *testing.T) {
	co := coordinator(t, 3, 10*time.Second)
	cls, errs := joinAll(t, co, []int{0, 1, 2}, 3)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	type note struct {
		node, code int
		reason     string
	}
	notes := make(chan note, 4)
	for _, cl := range cls[:2] {
		cl.OnAbort(func(node, code int, reason string) { notes <- note{node, code, reason} })
	}
	blocked := make(chan error, 1)
	go func() { blocked <- cls[0].Barrier("never", 10*time.Second) }()
	cls[2].conn.Close() // the process dies: no Leave
	for range 2 {
		select {
		case n := <-notes:
			if n.node != 2 || n.code != -1 || !strings.Contains(n.reason, "node 2") {
				t.Fatalf("abort note %+v", n)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no abort notice within 5 s")
		}
	}
	err := <-blocked
	var ae *AbortError
	if !errors.As(err, &ae) || ae.Node != 2 || !errors.Is(err, ErrAborted) {
		t.Fatalf("blocked barrier returned %v", err)
	}
	cls[0].conn.Close()
	cls[1].conn.Close()
	if err := waitDone(t, co); !errors.As(err, &ae) || ae.Node != 2 {
		t.Fatalf("coordinator: %v", err)
	}
}

func TestAbortPropagates(t *testing.T) {
	co := coordinator(t, 3, 10*time.Second)
	cls, _ := joinAll(t, co, []int{0, 1, 2}, 3)
	got := make(chan string, 3)
	for _, cl := range cls {
		cl.OnAbort(func(node, code int, reason string) { got <- fmt.Sprintf("%d/%d/%s", node, code, reason) })
	}
	if err := cls[1].Abort(7, "rank 4 panicked"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case s := <-got:
			if s != "1/7/rank 4 panicked" {
				t.Fatalf("got %q", s)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("abort not delivered")
		}
	}
}

func TestWrongSecretRejected(t *testing.T) {
	co := coordinator(t, 1, 10*time.Second)
	_, err := Join(ClientConfig{Coordinator: co.Addr(), Node: 0, Nodes: 1, Self: *ep("x:1"), Secret: []byte("wrong-secret-wrong-secret"), Timeout: 5 * time.Second})
	if !errors.Is(err, auth.ErrAuth) {
		t.Fatalf("wrong secret: %v", err)
	}
	// The coordinator counts a rejection once it has closed the connection, which the client may notice first.
	waitRejected := func(n int, what string) {
		t.Helper()
		start := time.Now()
		for co.Rejected() < n {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("%s: not rejected after %v (rejections: %d)", what, time.Since(start), co.Rejected())
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitRejected(1, "the wrong secret")
	// A stranger sending garbage registers nothing: checked once the coordinator has read the garbage and
	// turned the connection down.
	nc, err := net.Dial("tcp", co.Addr())
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte("garbage garbage garbage garbage garbage garbage garbage garbage garbage garbage garbage"))
	waitRejected(2, "the garbage")
	nc.Close()
	if ids := co.registered(); len(ids) != 0 {
		t.Fatalf("registered %v", ids)
	}
	cl, err := Join(ClientConfig{Coordinator: co.Addr(), Node: 0, Nodes: 1, Self: *ep("x:1"), Secret: secret, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if ids := co.registered(); len(ids) != 1 || ids[0] != 0 {
		t.Fatalf("after a good join, registered %v", ids)
	}
	cl.Leave()
}

func TestDuplicateNodeRejected(t *testing.T) {
	co := coordinator(t, 2, 10*time.Second)
	first := make(chan error, 1)
	go func() {
		_, err := Join(ClientConfig{Coordinator: co.Addr(), Node: 0, Nodes: 2, Self: *ep("a:1"), Secret: secret, Timeout: 5 * time.Second})
		first <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(co.registered()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	_, err := Join(ClientConfig{Coordinator: co.Addr(), Node: 0, Nodes: 2, Self: *ep("b:1"), Secret: secret, Timeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "registered twice") {
		t.Fatalf("duplicate: %v", err)
	}
	co.Close()
	<-first
}

func FuzzDecodeMessage(f *testing.F) {
	for _, m := range []message{
		{Kind: msgRegister, Node: 1, Self: &Endpoint{Host: "h", Addrs: map[string][]byte{"tcp": []byte("127.0.0.1:4000")}}},
		{Kind: msgTable, Table: []Endpoint{*ep("a:1"), *ep("b:2"), *ep("c:3")}},
		{Kind: msgTable, Table: []Endpoint{*ep("a:1"), {Host: "h"}, *ep("c:3")}},
		{Kind: msgRegister, Node: 1, Self: &Endpoint{Host: "h", Addrs: map[string][]byte{"TCP": []byte("x")}}},
		{Kind: msgBarrier, Name: "start"},
		{Kind: msgRelease, Name: "start"},
		{Kind: msgAbort, Node: 2, Code: 3, Reason: "boom"},
		{Kind: msgLeave},
		{Kind: msgError, Reason: "timeout"},
		{Kind: 99},
	} {
		b, err := encodeMessage(&m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[4:])
	}
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b, 3)
		if err != nil {
			return
		}
		if m.Kind < msgRegister || m.Kind > msgError || m.Node >= 3 || len(m.Reason) > maxReason {
			t.Fatalf("accepted %+v", m)
		}
		eps := m.Table
		if m.Self != nil {
			eps = append(eps, *m.Self)
		}
		for _, e := range eps {
			if e.Host == "" || len(e.Host) > maxHost || len(e.Addrs) == 0 || len(e.Addrs) > maxDevices {
				t.Fatalf("accepted endpoint %+v", e)
			}
			for k, v := range e.Addrs {
				if k == "" || len(k) > maxDevName || len(v) == 0 || len(v) > maxBlob {
					t.Fatalf("accepted device %q address of %d bytes", k, len(v))
				}
			}
		}
		if m.Kind == msgRegister && m.Self == nil {
			t.Fatal("accepted a register without an endpoint")
		}
		if m.Kind == msgTable && len(m.Table) != 3 {
			t.Fatalf("accepted a table of %d", len(m.Table))
		}
		// what is accepted re-encodes to a message that decodes to the same value
		re, err := encodeMessage(&m)
		if err != nil {
			t.Fatalf("accepted %+v, which does not encode: %v", m, err)
		}
		m2, err := decodeMessage(re[4:], 3)
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("accepted %+v; re-encoded it decodes to %+v, %v", m, m2, err)
		}
	})
}

// A message's declared lengths are checked against its bytes before it is decoded: a few bytes claiming a huge
// table, address or name are refused without the decoder allocating what they claim.
func TestDecodeBoundedAlloc(t *testing.T) {
	for _, b := range [][]byte{
		[]byte("\x82\xa1k\x02\xa1t\xdd\xff\xff\xff\xff"),                                                 // a table of 4G endpoints
		[]byte("\x83\xa1k\x01\xa1n\x00\xa1a\x82\xa1h\xa1x\xa1d\x81\xa3tcp\xc6\xff\xff\xff\xff"),          // a 4 GiB address
		[]byte("\x82\xa1k\x03\xa1b\xdb\xff\xff\xff\xff"),                                                 // a 4 GiB barrier name
		[]byte("\x83\xa1k\x01\xa1n\x00\xa1a\x82\xa1h\xa1x\xa1d\xd7\x00\xdf\xff\xff\xff\xff\x00\x00\x00"), // an extension where a map goes
	} {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		_, err := decodeMessage(b, 3)
		runtime.ReadMemStats(&m1)
		if !errors.Is(err, ErrBadMessage) {
			t.Errorf("%q: %v, want ErrBadMessage", b, err)
		}
		if a := m1.TotalAlloc - m0.TotalAlloc; a > 1<<20 {
			t.Errorf("%q: decoding allocated %d bytes", b, a)
		}
	}
}
