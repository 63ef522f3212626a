//go:build !linux

package node

import (
	"fmt"
	"os"
)

// hostIdentity names the host: node processes on it could share memory, though no host device is built here.
func hostIdentity() string {
	name, _ := os.Hostname()
	return fmt.Sprintf("%s/uid:%d", name, os.Getuid())
}

// onlineCPUs is unknown here: 0.
func onlineCPUs() int { return 0 }
