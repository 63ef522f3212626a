//go:build !ofi

package node

func init() {
	devices.add(deviceEntry{name: DevRDMA, summary: "other hosts: rdma over libfabric (InfiniBand, RoCE, EFA, Slingshot, tcp)",
		why: "built without ofi: rebuild with -tags ofi"})
}
