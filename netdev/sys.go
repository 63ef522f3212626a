//go:build linux

package netdev

import (
	"fmt"
	"net"
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
// registration in Go's poller; the socket stays open through the copy) and returns the copy, ready for our epoll set.
func detach(nc net.Conn) (int, error) {
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
	return fd, nil
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
