//go:build linux

package shm

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Claim words (rdma.Claimer) live in the control page, one to a cache line so that the two ends of one rendezvous
// do not share a line with another's: word i at claimBase + i*claimStride, 0 while open, 1 once taken. A sender
// opens a word for each rendezvous it offers for a split, and closes it when the send completes: by then the
// receiver has sent its FIN, so neither end claims it any more and the word may serve the next message.
const (
	claimBase   = 1024
	claimStride = 64
	claimWords  = (pageSize - claimBase) / claimStride
)

// claims is the free list of this node's claim words.
type claims struct {
	mu   sync.Mutex
	init bool
	free []uint16
}

// OpenClaim implements rdma.Claimer.
func (e *endpoint) OpenClaim() (uint64, bool) {
	c := &e.claims
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.init {
		c.init = true
		for i := claimWords - 1; i >= 0; i-- {
			c.free = append(c.free, uint16(i))
		}
	}
	if len(c.free) == 0 {
		return 0, false
	}
	i := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	atomic.StoreUint64(u64(e.seg.ctl, uint64(claimBase+int(i)*claimStride)), 0)
	return uint64(i), true
}

// Claim implements rdma.Claimer: a compare-and-swap on the word, in our control page or in our mapping of the
// peer's.
func (e *endpoint) Claim(node int, token uint64) (bool, error) {
	if token >= claimWords {
		return false, fmt.Errorf("shm: claim word %d of node %d, beyond the %d there are", token, node, claimWords)
	}
	ctl := e.seg.ctl
	if node != e.cfg.Node {
		p := e.peer(node)
		if p == nil || p.bell.ctl == nil {
			return false, fmt.Errorf("shm: claim word of node %d, which is not connected", node)
		}
		ctl = p.bell.ctl
	}
	return atomic.CompareAndSwapUint64(u64(ctl, claimBase+token*claimStride), 0, 1), nil
}

// CloseClaim implements rdma.Claimer.
func (e *endpoint) CloseClaim(token uint64) {
	if token >= claimWords {
		return
	}
	c := &e.claims
	c.mu.Lock()
	c.free = append(c.free, uint16(token))
	c.mu.Unlock()
}
