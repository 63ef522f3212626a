//go:build linux

package netdev

import (
	"net"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/device/devicetest"
)

var _ device.Transport = (*Device)(nil)

// TestConformance runs the device conformance suite over loopback TCP: 3 nodes of 2 ranks, two stripes.
func TestConformance(t *testing.T) {
	const nodes, rpn, eager, limit = 3, 2, 4 << 10, 256 << 10
	devicetest.Run(t, devicetest.Job{
		Nodes: nodes, RanksPerNode: rpn, EagerMax: eager,
		// the grant per peer is limit/(nodes-1); a sender stops once its credit is below one message
		HeldBound: limit/(nodes-1) + eager + creditOverhead,
		Open: func(t testing.TB, node int) device.Transport {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			d, err := Open(Config{Node: node, Nodes: nodes, Ranks: nodes * rpn, NodeOf: func(r int) int { return r / rpn },
				Secret: testSecret, Listener: ln, Stripes: 2, EagerLimit: eager, UnexpectedLimit: limit,
				HandshakeTimeout: 2 * time.Second, ConnectTimeout: 10 * time.Second, CloseTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		Kill: func(t testing.TB, node int, tr device.Transport) { tr.(*Device).crash() },
	})
}
