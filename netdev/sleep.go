//go:build linux

package netdev

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sleeper is where the progress loop sleeps: its epoll set (outer: the eventfd and the connections' set) as an
// *os.File in Go's netpoller. The loop parks there like a goroutine reading a socket, and its thread and P go to
// other goroutines at once. Sleeping in a blocking epoll_wait kept the P until sysmon took it back, 20 µs to 10 ms
// later, and with it the timers of that P: a rank asleep in time.Sleep(200 µs) while its collective progressed in
// the background woke up to 1.1 ms late (gompj bench ibcast -np 2 -nodes 2 -compute idle, GOMPJ_HOST_SHM=0, traced),
// and goroutines made runnable on that P (the next round of a collective, handed to the worker pool) waited too.
//
// While the loop stands down for driving ranks, the connections' set is hushed in outer (hush): else every frame
// arriving for a driving rank would make outer ready and wake a thread of the netpoller, for nobody (TCP 0-byte half
// round trip 4.8 -> 7.3 us before it was hushed).
type sleeper struct {
	fd       int  // outer
	hushed   bool // the connections' set is in outer with no events (loop only)
	f        *os.File
	rc       syscall.RawConn
	deadline bool                  // a read deadline is set
	evs      []unix.EpollEvent     // what the last look found
	n        int                   // how many
	err      error                 // the last look's failure
	look     func(fd uintptr) bool // looks without blocking; made once, so that a sleep allocates nothing
}

// newSleeper takes the epoll set fd (made non-blocking, as the netpoller requires) into the netpoller; the sleeper
// owns it from then on, and close closes it.
func newSleeper(fd int, evs []unix.EpollEvent) (*sleeper, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netdev: epoll set non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(fd), "gompj-netdev-loop")
	rc, err := f.SyscallConn()
	if err == nil {
		err = f.SetReadDeadline(time.Time{}) // fails unless the file is in the netpoller
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("netdev: the loop's epoll set is not in the netpoller: %w", err)
	}
	s := &sleeper{fd: fd, f: f, rc: rc, evs: evs}
	s.look = func(fd uintptr) bool {
		s.n, s.err = unix.EpollWait(int(fd), s.evs, 0)
		if s.err == unix.EINTR {
			s.n, s.err = 0, nil
		}
		return s.n > 0 || s.err != nil
	}
	return s, nil
}

// sleep waits until the set has events, which it returns in s.evs, or timeout ms pass (-1: no limit; then 0, nil).
func (s *sleeper) sleep(timeout int) (int, error) {
	if s.hushed && (timeout < 0 || timeout > 1) {
		timeout = 1
	}
	if timeout >= 0 {
		if err := s.f.SetReadDeadline(time.Now().Add(time.Duration(timeout) * time.Millisecond)); err != nil {
			return 0, err
		}
		s.deadline = true
	} else if s.deadline {
		if err := s.f.SetReadDeadline(time.Time{}); err != nil {
			return 0, err
		}
		s.deadline = false
	}
	s.n, s.err = 0, nil
	if err := s.rc.Read(s.look); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, nil
		}
		return 0, err
	}
	return s.n, s.err
}

// hush stops (on) or restarts the reports of the connections' set ep to outer (loop only). A failure (epoll_ctl
// fails on a set it holds only for lack of memory) leaves it as it was: reported, the loop's sleeps are as before;
// hushed, sleep looks again every millisecond (sleep's look finds what ep holds: its readiness is level-triggered).
func (s *sleeper) hush(ep int, on bool) {
	if s.hushed == on {
		return
	}
	ev := unix.EpollEvent{Fd: int32(ep)}
	if !on {
		ev.Events = unix.EPOLLIN
	}
	if unix.EpollCtl(s.fd, unix.EPOLL_CTL_MOD, ep, &ev) == nil {
		s.hushed = on
	}
}

func (s *sleeper) close() { s.f.Close() }
