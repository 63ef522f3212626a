//go:build linux

package netdev

import (
	"math/bits"
	"sync"

	"github.com/gompj/gompj/device"
)

// Buffers come in power-of-two size classes from 64 B up; a class's pool recycles whole objects so that the steady
// state allocates nothing (a sync.Pool of pointers does not allocate on Put).
const (
	minClassShift = 6
	numClasses    = 28 // 64 B .. 4 GiB: more than any eager limit
)

func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// inboundPool recycles device.Inbound values together with their payload buffers.
type inboundPool struct {
	classes [numClasses]sync.Pool
}

func (p *inboundPool) get(n int) *device.Inbound {
	c := classOf(n)
	if c >= numClasses {
		return &device.Inbound{Payload: make([]byte, n)}
	}
	if v, _ := p.classes[c].Get().(*device.Inbound); v != nil {
		v.Payload = v.Payload[:n]
		return v
	}
	return &device.Inbound{Payload: make([]byte, n, 1<<(c+minClassShift))}
}

func (p *inboundPool) put(in *device.Inbound) {
	c := cap(in.Payload)
	if c < 1<<minClassShift || c&(c-1) != 0 {
		return
	}
	k := classOf(c)
	if k >= numClasses {
		return
	}
	in.Header = device.Header{}
	in.Release = nil
	p.classes[k].Put(in)
}

// bufPool recycles the outbound queue's byte buffers.
type bufPool struct {
	classes [numClasses]sync.Pool
}

func (p *bufPool) get(n int) *[]byte {
	c := classOf(n)
	if c < numClasses {
		if v, _ := p.classes[c].Get().(*[]byte); v != nil {
			*v = (*v)[:0]
			return v
		}
		b := make([]byte, 0, 1<<(c+minClassShift))
		return &b
	}
	b := make([]byte, 0, n)
	return &b
}

func (p *bufPool) put(b *[]byte) {
	c := cap(*b)
	if c < 1<<minClassShift || c&(c-1) != 0 {
		return
	}
	if k := classOf(c); k < numClasses {
		p.classes[k].Put(b)
	}
}
