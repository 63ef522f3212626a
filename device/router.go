package device

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Router is the Device of a node whose peers are served by different devices: node processes on the same host
// through shared memory, the others through the network. Each peer node is served by exactly one device, so the
// order of a (Source, Dest) pair is that device's. It implements Poller and Registrar over the devices that do.
type Router struct {
	nodeOf  func(rank int) int
	byNode  []Device // indexed by node; nil for this node
	devs    []Device // distinct, in the order given
	pollers []Poller
	regs    []Registrar
	lenders []Lender
	polls   atomic.Uint32
}

// routeSlowEvery is how often Poll also polls the devices after the first: the first is the cheap one (shared
// memory, a few loads), the others cost a system call.
const routeSlowEvery = 4

// NewRouter returns a router sending to node n's ranks through byNode[n] (nil for this node). nodeOf maps a world
// rank to its node. The first distinct device in byNode order is polled on every Poll, so put the cheapest first.
func NewRouter(nodeOf func(rank int) int, byNode []Device, order []Device) (*Router, error) {
	r := &Router{nodeOf: nodeOf, byNode: byNode}
	seen := map[Device]bool{}
	add := func(d Device) {
		if d == nil || seen[d] {
			return
		}
		seen[d] = true
		r.devs = append(r.devs, d)
		if p, ok := d.(Poller); ok {
			r.pollers = append(r.pollers, p)
		}
		if g, ok := d.(Registrar); ok {
			r.regs = append(r.regs, g)
		}
		if l, ok := d.(Lender); ok {
			r.lenders = append(r.lenders, l)
		}
	}
	for _, d := range order {
		add(d)
	}
	for _, d := range byNode {
		add(d)
	}
	if len(r.devs) == 0 {
		return nil, errors.New("device: router with no device")
	}
	return r, nil
}

func (r *Router) to(rank int32) (Device, error) {
	n := -1
	if rank >= 0 {
		n = r.nodeOf(int(rank))
	}
	if n < 0 || n >= len(r.byNode) || r.byNode[n] == nil {
		return nil, fmt.Errorf("device: no device serves rank %d (node %d)", rank, n)
	}
	return r.byNode[n], nil
}

// DeviceFor returns the device that serves world rank rank, or nil if none does (a rank of this node, or out of
// range). A caller that sends often may look it up once and call that device itself: the device then checks the
// message as when the router passes it on.
func (r *Router) DeviceFor(rank int) Device {
	d, err := r.to(int32(rank))
	if err != nil {
		return nil
	}
	return d
}

// SendEager implements Device.
func (r *Router) SendEager(h *Header, payload []byte, done Completer) error {
	if h == nil {
		return errors.New("device: nil header")
	}
	d, err := r.to(h.Dest)
	if err != nil {
		return err
	}
	return d.SendEager(h, payload, done)
}

// SendRendezvous implements Device.
func (r *Router) SendRendezvous(h *Header, payload []byte, done Completer) error {
	if h == nil {
		return errors.New("device: nil header")
	}
	d, err := r.to(h.Dest)
	if err != nil {
		return err
	}
	return d.SendRendezvous(h, payload, done)
}

// ClearToSend implements Device: the RTS came through the device that serves its source.
func (r *Router) ClearToSend(rts *Header, dst []byte, done Completer) error {
	if rts == nil {
		return errors.New("device: nil header")
	}
	d, err := r.to(rts.Source)
	if err != nil {
		return err
	}
	return d.ClearToSend(rts, dst, done)
}

// Ack implements Device.
func (r *Router) Ack(h *Header) error {
	if h == nil {
		return errors.New("device: nil header")
	}
	d, err := r.to(h.Source)
	if err != nil {
		return err
	}
	return d.Ack(h)
}

// EagerLimit implements Device.
func (r *Router) EagerLimit(dest int) int {
	if dest < 0 {
		return 0
	}
	d, err := r.to(int32(dest))
	if err != nil {
		return 0
	}
	return d.EagerLimit(dest)
}

// Close implements Device: it closes every device, at once, and reports their errors.
func (r *Router) Close() error {
	errs := make([]error, len(r.devs))
	var wg sync.WaitGroup
	for i, d := range r.devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.Close()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Enter implements Poller.
func (r *Router) Enter() {
	for _, p := range r.pollers {
		p.Enter()
	}
}

// Poll implements Poller: the first poller every time, the others every routeSlowEvery-th time.
func (r *Router) Poll() bool {
	if len(r.pollers) == 0 {
		return false
	}
	got := r.pollers[0].Poll()
	if r.polls.Add(1)%routeSlowEvery == 0 {
		for _, p := range r.pollers[1:] {
			if p.Poll() {
				got = true
			}
		}
	}
	return got
}

// Leave implements Poller.
func (r *Router) Leave(parking bool) {
	for _, p := range r.pollers {
		p.Leave(parking)
	}
}

type multiReg []Registration

func (m multiReg) Release() {
	for _, g := range m {
		g.Release()
	}
}

// Register implements Registrar with every device that registers memory.
func (r *Router) Register(b []byte) (Registration, error) {
	var m multiReg
	for _, g := range r.regs {
		x, err := g.Register(b)
		if err != nil {
			m.Release()
			return nil, err
		}
		m = append(m, x)
	}
	return m, nil
}

// Alloc implements Lender with the first device that lends memory (the cheapest: shared memory comes first).
func (r *Router) Alloc(n int) ([]byte, error) {
	for _, l := range r.lenders {
		b, err := l.Alloc(n)
		if errors.Is(err, ErrNoLending) {
			continue
		}
		return b, err
	}
	return nil, ErrNoLending
}

// Free implements Lender with the device that lent b.
func (r *Router) Free(b []byte) (bool, error) {
	for _, l := range r.lenders {
		if ok, err := l.Free(b); ok {
			return true, err
		}
	}
	return false, nil
}

// segmentedTo returns the device serving rank if it moves segmented payloads for it.
func (r *Router) segmentedTo(rank int32) (Segmented, error) {
	d, err := r.to(rank)
	if err != nil {
		return nil, err
	}
	if s, ok := d.(Segmented); ok && s.Segments(int(rank)) {
		return s, nil
	}
	return nil, fmt.Errorf("device: the device serving rank %d does not move segmented payloads", rank)
}

// Segments implements Segmented: the device serving peer decides.
func (r *Router) Segments(peer int) bool {
	_, err := r.segmentedTo(int32(peer))
	return err == nil
}

// SendEagerv implements Segmented.
func (r *Router) SendEagerv(h *Header, p Payload, done Completer) error {
	if h == nil {
		return errors.New("device: nil header")
	}
	s, err := r.segmentedTo(h.Dest)
	if err != nil {
		return err
	}
	return s.SendEagerv(h, p, done)
}

// SendRendezvousv implements Segmented.
func (r *Router) SendRendezvousv(h *Header, p Payload, done Completer) error {
	if h == nil {
		return errors.New("device: nil header")
	}
	s, err := r.segmentedTo(h.Dest)
	if err != nil {
		return err
	}
	return s.SendRendezvousv(h, p, done)
}

// ClearToSendv implements Segmented: the RTS came through the device that serves its source.
func (r *Router) ClearToSendv(rts *Header, dst Payload, done Completer) error {
	if rts == nil {
		return errors.New("device: nil header")
	}
	s, err := r.segmentedTo(rts.Source)
	if err != nil {
		return err
	}
	return s.ClearToSendv(rts, dst, done)
}

var (
	_ Device    = (*Router)(nil)
	_ Poller    = (*Router)(nil)
	_ Registrar = (*Router)(nil)
	_ Lender    = (*Router)(nil)
	_ Segmented = (*Router)(nil)
)
