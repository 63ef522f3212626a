//go:build !linux

package node

// bindShare does nothing here: binding is sched_setaffinity, Linux's. It says so in the route table.
func bindShare(mode string, index, count int) string {
	if mode != BindCores || count <= 1 {
		return ""
	}
	return "\n  cores    GOMPJ_BIND=cores has no effect on this system"
}
