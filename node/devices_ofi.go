//go:build ofi

package node

import (
	"net"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/rdma"
	"github.com/gompj/gompj/rdma/ofi"
)

func init() {
	devices.add(deviceEntry{name: DevRDMA, summary: "other hosts: rdma over libfabric (InfiniBand, RoCE, EFA, Slingshot, tcp)",
		open: openRDMA, status: func(Config) string { return ofi.Status() }})
}

// openRDMA opens the rdma device over libfabric (FI_PROVIDER chooses the fabric). For fabrics addressed by
// sockets the endpoint listens where netdev would: GOMPJ_LISTEN, or the address that routes to the coordinator.
func openRDMA(s *openSpec) (device.Transport, error) {
	cfg := s.cfg
	var src string
	if laddr, err := listenAddress(cfg); err == nil {
		src, _, _ = net.SplitHostPort(laddr)
	}
	ep, err := ofi.New(ofi.Options{Source: src}).Open(rdma.EndpointConfig{Node: cfg.NodeID, Nodes: cfg.Nodes, Secret: cfg.Secret})
	if err != nil {
		return nil, err
	}
	return rdma.New(ep, rdma.Config{Node: cfg.NodeID, Nodes: cfg.Nodes, Ranks: cfg.Ranks, NodeOf: s.layout.NodeOf,
		Name: DevRDMA, UnexpectedLimit: cfg.UnexpectedLimit, BusyPoll: cfg.BusyPoll,
		RegCacheBytes: cfg.RegCacheBytes})
}
