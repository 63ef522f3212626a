//go:build linux

package netdev

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestSleeper drives the loop's sleeper: an eventfd and an inner epoll set (holding a pipe) in its set, as the
// device's evfd and ep are.
func TestSleeper(t *testing.T) {
	ev, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ev)
	inner, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(inner)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	if err := unix.EpollCtl(inner, unix.EPOLL_CTL_ADD, p[0], &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(p[0])}); err != nil {
		t.Fatal(err)
	}
	outer, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range []int{ev, inner} {
		if err := unix.EpollCtl(outer, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := newSleeper(outer, make([]unix.EpollEvent, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()

	if n, err := s.sleep(0); n != 0 || err != nil {
		t.Fatalf("sleep(0) with nothing ready = %d, %v", n, err)
	}
	if n, err := s.sleep(1); n != 0 || err != nil {
		t.Fatalf("sleep(1) with nothing ready = %d, %v", n, err)
	}
	// A wake-up from another goroutine ends a sleep without limit.
	go unix.Write(ev, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	if n, err := s.sleep(-1); n != 1 || err != nil || s.evs[0].Fd != int32(ev) {
		t.Fatalf("sleep(-1) woken by the eventfd = %d, %v, fd %d", n, err, s.evs[0].Fd)
	}
	var b [8]byte
	unix.Read(ev, b[:])

	// Hushed, the inner set's readiness is not reported, and a sleep without limit looks again within a
	// millisecond; unhushed, what it holds is reported at once (level-triggered).
	s.hush(inner, true)
	unix.Write(p[1], []byte{7})
	if n, err := s.sleep(-1); n != 0 || err != nil {
		t.Fatalf("hushed: sleep(-1) = %d, %v, want 0 after its millisecond", n, err)
	}
	s.hush(inner, false)
	if n, err := s.sleep(-1); n != 1 || err != nil || s.evs[0].Fd != int32(inner) {
		t.Fatalf("unhushed: sleep(-1) = %d, %v, fd %d, want the inner set", n, err, s.evs[0].Fd)
	}
	unix.Read(p[0], b[:])
	// An arrival while asleep wakes it.
	go unix.Write(p[1], []byte{8})
	if n, err := s.sleep(-1); n != 1 || err != nil || s.evs[0].Fd != int32(inner) {
		t.Fatalf("arrival: sleep(-1) = %d, %v, fd %d, want the inner set", n, err, s.evs[0].Fd)
	}
}
