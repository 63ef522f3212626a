//go:build linux

package shm

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func helloBytes(h hello) []byte {
	var b [helloSize]byte
	h.put(&b)
	return b[:]
}

// TestParseHello: a hello round-trips; one of another size, magic, node, CMA flag or with no ring is refused.
func TestParseHello(t *testing.T) {
	good := hello{node: 3, ringOff: 4096, ringLen: 1 << 20, probe: 0xc000123456, probeVal: 42, cma: true}
	if h, err := parseHello(helloBytes(good), 3); err != nil || h != good {
		t.Fatalf("round trip: %+v, %v; want %+v", h, err, good)
	}
	bad := map[string][]byte{
		"short":       helloBytes(good)[:helloSize-1],
		"long":        append(helloBytes(good), 0),
		"from node 2": helloBytes(good),
	}
	b := helloBytes(good)
	b[0] ^= 1
	bad["magic"] = b
	b = helloBytes(good)
	b[48] = 2
	bad["cma flag 2"] = b
	g := good
	g.ringLen = 0
	bad["no ring"] = helloBytes(g)
	g = good
	g.ringOff = -4096
	bad["ring before the segment"] = helloBytes(g)
	for name, b := range bad {
		node := 3
		if name == "from node 2" {
			node = 2
		}
		if _, err := parseHello(b, node); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseHello: a hello comes from another process. Parsing never panics, and what it accepts is what put
// writes for the fields it returned, but for the reserved bytes.
func FuzzParseHello(f *testing.F) {
	f.Add(helloBytes(hello{node: 1, ringOff: 4096, ringLen: 1 << 20, probe: 1, probeVal: 2, cma: true}))
	f.Add(helloBytes(hello{node: 1, ringOff: 1 << 62, ringLen: 1 << 62}))
	f.Add(make([]byte, helloSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHello(b, 1)
		if err != nil {
			return
		}
		re := helloBytes(h)
		for i := range b {
			if reserved := i >= 12 && i < 16 || i >= 49; !reserved && b[i] != re[i] {
				t.Fatalf("accepted %x as %+v, which is %x", b, h, re)
			}
		}
	})
}

// TestTwoFds: the descriptors of a hello's control message are handed back when there are two; otherwise every
// one that arrived is closed (the kernel has installed them all in this process), with an error, also when a
// malformed control message follows them. The control messages are built as the kernel delivers them, around
// descriptors this process owns, so no second process (or socket) is needed.
func TestTwoFds(t *testing.T) {
	open := func(n int) []int {
		fds := make([]int, n)
		for i := range fds {
			fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			fds[i] = fd
		}
		return fds
	}
	isOpen := func(fd int) bool {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil && !errors.Is(err, unix.EBADF) {
			t.Fatalf("fcntl(%d): %v", fd, err)
		}
		return err == nil
	}
	// malformed is a control message header claiming more bytes than there are.
	malformed := func() []byte {
		b := make([]byte, unix.CmsgSpace(0))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		h.Level, h.Type = unix.SOL_SOCKET, unix.SCM_RIGHTS
		h.SetLen(1 << 10)
		return b
	}
	cases := []struct {
		name string
		n    int
		oob  func(fds []int) []byte
		ok   bool
	}{
		{"two", 2, func(fds []int) []byte { return unix.UnixRights(fds...) }, true},
		{"two in two messages, after credentials", 2, func(fds []int) []byte {
			b := unix.UnixCredentials(&unix.Ucred{Pid: 1})
			b = append(b, unix.UnixRights(fds[0])...)
			return append(b, unix.UnixRights(fds[1])...)
		}, true},
		{"none", 0, func([]int) []byte { return nil }, false},
		{"one", 1, func(fds []int) []byte { return unix.UnixRights(fds...) }, false},
		{"three", 3, func(fds []int) []byte { return unix.UnixRights(fds...) }, false},
		{"four in two messages", 4, func(fds []int) []byte {
			return append(unix.UnixRights(fds[:2]...), unix.UnixRights(fds[2:]...)...)
		}, false},
		{"two, then a malformed message", 2, func(fds []int) []byte {
			return append(unix.UnixRights(fds...), malformed()...)
		}, false},
	}
	for _, tc := range cases {
		fds := open(tc.n)
		got, err := twoFds(tc.oob(fds))
		if tc.ok {
			if err != nil || got != [2]int{fds[0], fds[1]} || !isOpen(fds[0]) || !isOpen(fds[1]) {
				t.Errorf("%s: %v, %v; want %v open", tc.name, got, err, fds)
			}
			unix.Close(fds[0])
			unix.Close(fds[1])
			continue
		}
		if err == nil || got != [2]int{-1, -1} {
			t.Errorf("%s: %v, %v; want an error", tc.name, got, err)
		}
		t.Logf("%s: %v", tc.name, err)
		for i, fd := range fds {
			if isOpen(fd) {
				t.Errorf("%s: descriptor %d of %d left open", tc.name, i, len(fds))
				unix.Close(fd)
			}
		}
	}
}
