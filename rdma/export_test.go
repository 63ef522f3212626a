package rdma

import (
	"sync/atomic"

	"github.com/gompj/gompj/device"
)

// ForgeCTS encodes the CTS a receiver would send for the message whose RTS is rts, taking length bytes; with rma,
// asking the sender to Write from offset.
func ForgeCTS(rts device.Header, length uint64, rma bool, offset uint64) []byte {
	c := hdr{Header: rts}
	c.Kind = device.KindCTS
	c.Flags &= device.FlagSync
	c.Length = length
	if rma {
		c.Flags |= flagRMA
		c.raddr, c.rkey, c.offset = 64, 1, offset
	}
	b := make([]byte, extHdrSize)
	return b[:c.put(b)]
}

// IdleYieldEvery is idleYieldEvery.
const IdleYieldEvery = idleYieldEvery

// CountYields makes Poll's yields count into n until the returned function restores them.
func CountYields(n *atomic.Int32) (restore func()) {
	old := schedYield
	schedYield = func() { n.Add(1) }
	return func() { schedYield = old }
}
