//go:build linux

package netdev

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
)

var testSecret = []byte("0123456789abcdef-test-secret-xyz")

type lostMsg struct {
	node int
	err  error
}

// sink records what a device delivers. Hooks, when set, run first (in the progress loop) and may consume the event.
type sink struct {
	mu      sync.Mutex
	eager   []*device.Inbound
	rts     []*device.Header
	lost    []lostMsg
	changed chan struct{}

	onEager func(*device.Inbound) bool
	onRTS   func(*device.Header) bool
	// onClaim, when set, answers ClaimEager (in the progress loop); otherwise every message is delivered.
	onClaim func(*device.Header) (device.Payload, device.Completer, bool)
}

// ClaimEager implements device.EagerClaimer through the onClaim hook.
func (s *sink) ClaimEager(h *device.Header) (device.Payload, device.Completer, bool) {
	s.mu.Lock()
	hook := s.onClaim
	s.mu.Unlock()
	if hook == nil {
		return device.Payload{}, nil, false
	}
	return hook(h)
}

func newSink() *sink { return &sink{changed: make(chan struct{}, 1)} }

func (s *sink) poke() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *sink) DeliverEager(in *device.Inbound) {
	s.mu.Lock()
	hook := s.onEager
	s.mu.Unlock()
	if hook != nil && hook(in) {
		return
	}
	s.mu.Lock()
	s.eager = append(s.eager, in)
	s.mu.Unlock()
	s.poke()
}

func (s *sink) DeliverRTS(h *device.Header) {
	c := *h // the device's header is valid during the call only (device.Sink)
	h = &c
	s.mu.Lock()
	hook := s.onRTS
	s.mu.Unlock()
	if hook != nil && hook(h) {
		return
	}
	s.mu.Lock()
	s.rts = append(s.rts, h)
	s.mu.Unlock()
	s.poke()
}

func (s *sink) PeerLost(node int, err error) {
	s.mu.Lock()
	s.lost = append(s.lost, lostMsg{node, err})
	s.mu.Unlock()
	s.poke()
}

// wait blocks until cond (evaluated under the sink's lock) holds, failing the test after timeout.
func (s *sink) wait(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.changed:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

func (s *sink) counts() (eager, rts, lost int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.eager), len(s.rts), len(s.lost)
}

// waitUntil polls cond (for state with no event to wait on, such as returned credit) until it holds.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// completer records its one completion.
type completer chan error

func newCompleter() completer { return make(completer, 1) }

func (c completer) Complete(err error) {
	select {
	case c <- err:
	default:
		panic("completed twice")
	}
}

func (c completer) wait(t testing.TB, timeout time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
		return nil
	}
}

// cluster is n devices on loopback, ranksPerNode ranks each in blocks.
type cluster struct {
	devs  []*Device
	sinks []*sink
	rpn   int
}

func (c *cluster) rank(node, local int) int32 { return int32(node*c.rpn + local) }

func startCluster(t testing.TB, n, rpn int, mod func(i int, cfg *Config)) *cluster {
	t.Helper()
	lns := make([]net.Listener, n)
	addrs := make([]string, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		addrs[i] = ln.Addr().String()
	}
	c := &cluster{rpn: rpn}
	for i := range n {
		s := newSink()
		cfg := Config{
			Node: i, Ranks: n * rpn, NodeOf: func(r int) int { return r / rpn },
			Secret: testSecret, Listener: lns[i],
			HandshakeTimeout: 2 * time.Second, ConnectTimeout: 10 * time.Second, CloseTimeout: 5 * time.Second,
		}
		if mod != nil {
			mod(i, &cfg)
		}
		d, err := newStarted(cfg, s, addrs)
		if err != nil {
			t.Fatal(err)
		}
		c.devs = append(c.devs, d)
		c.sinks = append(c.sinks, s)
	}
	t.Cleanup(func() {
		for _, d := range c.devs {
			d.Close()
		}
	})
	for i, d := range c.devs {
		if !d.cfg.Lazy {
			if err := d.WaitConnected(10 * time.Second); err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
		}
	}
	return c
}

// newStarted opens and starts a device of a job whose nodes listen at addrs.
func newStarted(cfg Config, s device.Sink, addrs []string) (*Device, error) {
	cfg.Nodes = len(addrs)
	d, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	blobs := make([][]byte, len(addrs))
	for i, a := range addrs {
		if i != cfg.Node {
			blobs[i] = []byte(a)
		}
	}
	if err := d.Start(s, blobs); err != nil {
		return nil, err
	}
	return d, nil
}

func payloadFor(src, dst int32, i, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(int(src)*31 + int(dst)*7 + i + k)
	}
	if n >= 8 {
		copy(b, fmt.Appendf(nil, "%08d", i%100000000))
	}
	return b
}
