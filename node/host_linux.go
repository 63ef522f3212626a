//go:build linux

package node

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gompj/gompj/internal/cpus"
)

// hostIdentity names what node processes able to share memory have in common: the same kernel boot, network
// namespace (the host device's abstract Unix sockets live there), PID namespace (CMA addresses processes by pid)
// and user (CMA and the shared segments need the same uid). Node processes in different containers or network
// namespaces of one machine are different hosts for routing, and talk through the network.
func hostIdentity() string {
	name, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns := func(kind string) uint64 {
		var st unix.Stat_t
		if unix.Stat("/proc/self/ns/"+kind, &st) != nil {
			return 0
		}
		return st.Ino
	}
	id := fmt.Sprintf("%s/%s/net:%d/pid:%d/uid:%d", name, strings.TrimSpace(string(boot)), ns("net"), ns("pid"), os.Getuid())
	if len(id) > 200 {
		id = id[:200]
	}
	return id
}

// onlineCPUs is the number of CPUs online on the host (/sys/devices/system/cpu/online, "0-3,8-11"), whatever this
// process's affinity; 0 when it cannot be read.
func onlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 0
	}
	return cpus.Count(string(b))
}
