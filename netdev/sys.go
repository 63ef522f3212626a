//go:build linux

package netdev

import (
	"fmt"
	"net"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gompj/gompj/device"
)

// maxIov bounds how many buffers one writev gathers.
const maxIov = 16

// writev writes the gathered buffers with one system call. It allocates nothing: the iovec array belongs to the
// caller (a connection, under its mutex). The socket is non-blocking, so the call never sleeps in the kernel and
// skips the scheduler's system-call bookkeeping (RawSyscall), as pollNow does.
func writev(fd int, iov []unix.Iovec) (int, error) {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

func setIov(v *unix.Iovec, b []byte) {
	v.Base = &b[0]
	v.SetLen(len(b))
}

// readFd reads into b from a non-blocking socket, retrying on EINTR. Like writev it never sleeps in the kernel,
// so it is a raw system call.
func readFd(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

// detach takes the socket out of an authenticated net.Conn: it duplicates the descriptor (the copy shares the
// socket, which Go already made non-blocking), closes the net.Conn (which only drops Go's descriptor and its
// registration in Go's poller; the socket stays open through the copy) and returns the copy, ready for our epoll set,
// with Nagle off and the congestion control that cc (Config.Congestion) asks for on this connection.
func detach(nc net.Conn, cc string) (int, error) {
	defer nc.Close()
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return -1, fmt.Errorf("netdev: %s is not a TCP connection", nc.RemoteAddr())
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := raw.Control(func(s uintptr) {
		fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, fmt.Errorf("netdev: dup of the socket to %s: %w", nc.RemoteAddr(), derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if name := congestionFor(cc, nc.LocalAddr(), nc.RemoteAddr()); name != "" {
		err := unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, name)
		if err != nil && cc != "" && cc != CongestionAuto {
			unix.Close(fd)
			return -1, congestionErr(name, err)
		}
		// Auto's Reno is a speed-up, not a requirement: a kernel that refuses it keeps its default.
	}
	return fd, nil
}

// Config.Congestion's two words; any other value names an algorithm.
const (
	CongestionAuto   = "auto"
	CongestionSystem = "system"
)

// congestionFor is the congestion control to set on a connection between local and remote under cc, or "" to
// leave the kernel's default.
//
// Auto sets Reno on a connection within this host (node processes of one host with GOMPJ_HOST_SHM=0, or a job
// whose nodes share a host): there the kernel's default here, BBR, paced each connection at its estimate of a path
// that does not exist, and a 1 MiB message took 186 us against Reno's 112 (ping-pong between 2 node processes over
// loopback, 3 alternated runs; 4 MiB: 703-862 against 471-624 us; osu_bw at 1 MiB 6.6-7.8 against 10.5-11.1
// GB/s). Between hosts the kernel's choice stands: it is the administrator's, for that network.
func congestionFor(cc string, local, remote net.Addr) string {
	switch cc {
	case CongestionSystem:
		return ""
	case "", CongestionAuto:
		if sameHost(local, remote) {
			return "reno"
		}
		return ""
	}
	return cc
}

// sameHost reports whether a connection between local and remote stays within this host: the remote end is a
// loopback address, or the same address as the local end (the kernel routes a host's own addresses through
// loopback).
func sameHost(local, remote net.Addr) bool {
	l, ok1 := local.(*net.TCPAddr)
	r, ok2 := remote.(*net.TCPAddr)
	return ok1 && ok2 && (r.IP.IsLoopback() || l.IP.Equal(r.IP))
}

// checkCongestion validates Config.Congestion: an algorithm named there must be one this process may set, which a
// throwaway socket tries at Open, so that a wrong name fails the job at its start with the reason, not each
// connection as it comes up.
func checkCongestion(cc string) error {
	if cc == "" || cc == CongestionAuto || cc == CongestionSystem {
		return nil
	}
	if len(cc) > 15 || strings.ContainsFunc(cc, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) {
		return fmt.Errorf("netdev: TCP congestion control %q: not an algorithm's name (auto, system, or a name "+
			"such as reno or cubic)", cc)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netdev: a socket to try TCP congestion control %q on: %w", cc, err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc); err != nil {
		return congestionErr(cc, err)
	}
	return nil
}

// congestionErr explains a refused congestion control, with the algorithms this process may choose.
func congestionErr(name string, err error) error {
	allowed := "see net.ipv4.tcp_allowed_congestion_control"
	if b, rerr := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control"); rerr == nil {
		allowed = "this process may choose: " + strings.TrimSpace(string(b))
	}
	return fmt.Errorf("netdev: TCP congestion control %q: %w (%s)", name, err, allowed)
}

// schedYield is device.SchedYield (Poll); a variable, so that tests count the calls.
var schedYield = device.SchedYield

// pollNow is epoll_wait with a zero timeout. It never blocks, so it skips the scheduler's system-call bookkeeping,
// which matters in the busy-poll loop.
func pollNow(ep int, evs []unix.EpollEvent) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(ep), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
