//go:build linux

package shm

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The control page heads every node's segment:
//
//	offset size field
//	0      8    magic "GOMPJSH1"
//	8      4    node id
//	64     4    sleeping: 1 while the node's progress goroutine waits on the doorbell (the producer that rings lowers it)
//	128    4    doorbell: a futex word that producers bump to wake it
const (
	pageSize     = 4096
	ctlMagic     = 0x3148534a504d4f47 // "GOMPJSH1", little-endian
	ctlSleeping  = 64
	ctlDoorbell  = 128
	futexWaitOp  = 0 // FUTEX_WAIT, shared between processes (no FUTEX_PRIVATE_FLAG)
	futexWakeOp  = 1 // FUTEX_WAKE
	requiredSeal = unix.F_SEAL_SHRINK
)

// segment is this node's shared memory: a memfd (no name in any file system, so nothing is left behind even after
// SIGKILL), mode 0600, sealed against shrinking (a peer holding it cannot truncate it under our mappings). It
// holds the control page and one inbound ring per peer, added as peers connect.
type segment struct {
	fd   int
	size int64
	ctl  []byte
	maps [][]byte
}

func newSegment(node int) (*segment, error) {
	fd, err := unix.MemfdCreate(fmt.Sprintf("gompj-node-%d", node), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	s := &segment{fd: fd}
	if err := unix.Fchmod(fd, 0o600); err != nil {
		s.close()
		return nil, fmt.Errorf("shm: fchmod: %w", err)
	}
	if err := unix.Ftruncate(fd, pageSize); err != nil {
		s.close()
		return nil, fmt.Errorf("shm: ftruncate: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, requiredSeal); err != nil {
		s.close()
		return nil, fmt.Errorf("shm: sealing the segment: %w", err)
	}
	s.size = pageSize
	if s.ctl, err = mmap(fd, 0, pageSize); err != nil {
		s.close()
		return nil, err
	}
	s.maps = append(s.maps, s.ctl)
	*u64(s.ctl, 0) = ctlMagic
	*(*uint32)(unsafe.Pointer(&s.ctl[8])) = uint32(node)
	return s, nil
}

// addRing grows the segment by a ring of n bytes and maps it. Called by one goroutine at a time.
func (s *segment) addRing(n int) (off int64, mem []byte, err error) {
	off = s.size
	sz := int64((n + pageSize - 1) &^ (pageSize - 1))
	if err := unix.Ftruncate(s.fd, off+sz); err != nil {
		return 0, nil, fmt.Errorf("shm: growing the segment: %w", err)
	}
	s.size += sz
	m, err := mmap(s.fd, off, int(sz))
	if err != nil {
		return 0, nil, err
	}
	s.maps = append(s.maps, m)
	return off, m[:n:n], nil
}

func (s *segment) close() {
	for _, m := range s.maps {
		unix.Munmap(m)
	}
	s.maps = nil
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

func mmap(fd int, off int64, n int) ([]byte, error) {
	m, err := unix.Mmap(fd, off, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap of %d bytes at %d: %w", n, off, err)
	}
	return m, nil
}

// peerMaps are the parts of a peer's segment this node maps: its control page (to wake it) and the ring this
// node produces into.
type peerMaps struct {
	ctl, ring []byte
}

// mapPeer maps a peer's segment, received as fd, after checking that it is sealed against shrinking and holds
// the ring it announced.
func mapPeer(fd int, ringOff, ringLen int64) (*peerMaps, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&requiredSeal == 0 {
		return nil, fmt.Errorf("shm: the peer's segment is not a memfd sealed against shrinking (seals %#x, %v)", seals, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: fstat of the peer's segment: %w", err)
	}
	if ringOff < pageSize || ringOff%pageSize != 0 || ringLen <= 0 || ringLen > maxRingLen || ringOff+ringLen > st.Size {
		return nil, fmt.Errorf("shm: the peer announces a ring of %d bytes at %d in a segment of %d", ringLen, ringOff, st.Size)
	}
	ctl, err := mmap(fd, 0, pageSize)
	if err != nil {
		return nil, err
	}
	if *u64(ctl, 0) != ctlMagic {
		unix.Munmap(ctl)
		return nil, errors.New("shm: the peer's segment has no control page")
	}
	ring, err := mmap(fd, ringOff, int((ringLen+pageSize-1)&^(pageSize-1)))
	if err != nil {
		unix.Munmap(ctl)
		return nil, err
	}
	return &peerMaps{ctl: ctl, ring: ring[:ringLen:ringLen]}, nil
}

func (m *peerMaps) close() {
	unix.Munmap(m.ctl)
	unix.Munmap(m.ring[:cap(m.ring)])
}

func u32(b []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

// wake rings the doorbell of the node whose control page is ctl, if it sleeps: a system call only then, and only
// by the first producer to see the flag up. That producer lowers the flag itself (compare-and-swap) before it
// rings. Otherwise the flag stays up until the woken goroutine runs again, which takes tens of microseconds on a
// loaded box, and every message meanwhile would pay a futex system call (one message in twenty did, in a 0-byte
// ping-pong between two node processes whose ranks poll the rings themselves, while each node's progress
// goroutine slept).
//
// No wake-up is lost: a producer that finds the flag down published its entry before reading the flag. Either the
// flag was lowered by another producer, who rings, or the sleeper raises it again after that read. The sleeper
// looks for work after raising it (Wait), and the atomics are sequentially consistent, so it sees the entry.
func wake(ctl []byte) {
	s := u32(ctl, ctlSleeping)
	if atomic.LoadUint32(s) == 0 || !atomic.CompareAndSwapUint32(s, 1, 0) {
		return
	}
	ring(ctl)
}

// ring bumps the doorbell and wakes a waiter.
func ring(ctl []byte) {
	atomic.AddUint32(u32(ctl, ctlDoorbell), 1)
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(u32(ctl, ctlDoorbell))), futexWakeOp, 1, 0, 0, 0)
}

// sleep waits on this node's doorbell until it moves from seen, or timeout. The caller has set sleeping and
// checked for work after reading seen, so a producer that published since has moved the doorbell.
func sleep(ctl []byte, seen uint32, timeout time.Duration) {
	ts := unix.NsecToTimespec(int64(timeout))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(u32(ctl, ctlDoorbell))), futexWaitOp, uintptr(seen),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// cmaStatus says whether this process can use cross-memory attach (process_vm_readv/writev) at all, and why not.
// Where Yama restricts ptrace to descendants (ptrace_scope 1), the process allows any of its user's processes to
// attach to it (PR_SET_PTRACER_ANY): the peers of a job are not each other's descendants. Scopes 2 and 3 forbid
// it; a seccomp filter or an old kernel may refuse the system calls (ENOSYS, EPERM), which a read of this
// process's own memory shows.
func cmaStatus(off bool, probe *uint64) (ok bool, why string) {
	if off {
		return false, "GOMPJ_CMA=0"
	}
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil {
		switch strings.TrimSpace(string(b)) {
		case "1":
			if err := unix.Prctl(unix.PR_SET_PTRACER, unix.PR_SET_PTRACER_ANY, 0, 0, 0); err != nil {
				return false, fmt.Sprintf("Yama ptrace_scope 1 and prctl(PR_SET_PTRACER) failed: %v", err)
			}
		case "2", "3":
			return false, "Yama ptrace_scope " + strings.TrimSpace(string(b)) + " forbids it"
		}
	}
	var got uint64
	if err := cmaCopy(false, os.Getpid(), unsafe.Slice((*byte)(unsafe.Pointer(&got)), 8), uint64(uintptr(unsafe.Pointer(probe)))); err != nil {
		return false, fmt.Sprintf("process_vm_readv refused: %v", err)
	}
	if got != *probe {
		return false, "process_vm_readv read the wrong bytes"
	}
	return true, ""
}

// cmaCopyv moves the bytes at raddr in process pid into the locals, in order (or, with write, the locals' bytes
// there), with up to cmaIov local iovecs a call (the stack holds them). It loops over partial transfers.
func cmaCopyv(write bool, pid int, locals [][]byte, raddr uint64) error {
	call := uintptr(unix.SYS_PROCESS_VM_READV)
	if write {
		call = unix.SYS_PROCESS_VM_WRITEV
	}
	var liov [cmaIov]unix.Iovec
	skip := 0 // bytes of locals[0] already read
	for len(locals) > 0 {
		k, n := 0, 0
		for k < len(locals) && k < cmaIov {
			b := locals[k]
			if k == 0 {
				b = b[skip:]
			}
			if len(b) > 0 {
				liov[k].Base = &b[0]
			} else {
				liov[k].Base = nil
			}
			liov[k].SetLen(len(b))
			n += len(b)
			k++
		}
		if n == 0 {
			return nil
		}
		riov := unix.RemoteIovec{Base: uintptr(raddr), Len: n}
		got, _, e := unix.Syscall6(call, uintptr(pid), uintptr(unsafe.Pointer(&liov[0])),
			uintptr(k), uintptr(unsafe.Pointer(&riov)), 1, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		if got == 0 {
			return errors.New("no progress")
		}
		raddr += uint64(got)
		for left := int(got); left > 0; {
			rest := len(locals[0]) - skip
			if left < rest {
				skip += left
				break
			}
			left -= rest
			locals, skip = locals[1:], 0
		}
		for len(locals) > 0 && len(locals[0]) == skip {
			locals, skip = locals[1:], 0
		}
	}
	return nil
}

// cmaIov is how many local iovecs cmaCopyv hands the kernel a call.
const cmaIov = 64

// cmaCopy moves len(local) bytes between local and raddr in process pid: a write when write is set, else a read.
// It loops over partial transfers. The call may take long (it copies, and faults pages in), so it is an ordinary
// system call that lets the scheduler run other goroutines meanwhile.
func cmaCopy(write bool, pid int, local []byte, raddr uint64) error {
	call := unix.SYS_PROCESS_VM_READV
	if write {
		call = unix.SYS_PROCESS_VM_WRITEV
	}
	for len(local) > 0 {
		liov := unix.Iovec{Base: &local[0]}
		liov.SetLen(len(local))
		riov := unix.RemoteIovec{Base: uintptr(raddr), Len: len(local)}
		n, _, e := unix.Syscall6(uintptr(call), uintptr(pid), uintptr(unsafe.Pointer(&liov)), 1,
			uintptr(unsafe.Pointer(&riov)), 1, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		if n == 0 {
			return errors.New("no progress")
		}
		local = local[n:]
		raddr += uint64(n)
	}
	return nil
}
