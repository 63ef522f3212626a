//go:build linux

package shm

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The control page heads every node's segment:
//
//	offset size field
//	0      8    magic "GOMPJSH2"
//	8      4    node id
//	64     4    sleeping: 1 while the node's progress goroutine waits on its doorbell (the producer that rings lowers it)
//	1024   8    claim word 0 (rdma.Claimer, claim.go), then one every 64 bytes to the page's end: 0 open, 1 taken
//
// The doorbell itself is an eventfd, passed to each peer with the segment: a producer rings by writing to it, and
// the sleeper reads it through Go's netpoller (see doorbell).
const (
	pageSize     = 4096
	ctlMagic     = 0x3248534a504d4f47 // "GOMPJSH2", little-endian (1 had a futex doorbell in the control page)
	ctlSleeping  = 64
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

// populate maps the pages of m (page-aligned) into this process ahead of use (MADV_POPULATE_WRITE, Linux 5.14), so
// that touching them costs no page fault: a fault cost 12.5-14.5 us a page on the VM of the measurements, against
// 0.4-1.4 us a page populated. On an older kernel it does nothing, and the pages fault in as they are touched.
func populate(m []byte) {
	if len(m) > 0 {
		unix.Madvise(m, unix.MADV_POPULATE_WRITE)
	}
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
	if ringOff < pageSize || ringOff%pageSize != 0 || ringLen <= 0 || ringLen > maxRingLen || ringOff > st.Size-ringLen {
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

// bell is the ringing end of a node's doorbell: its control page (the sleeping flag) and its eventfd (this
// process's descriptor of it).
type bell struct {
	ctl []byte
	fd  int
}

// one is what a ring adds to an eventfd's count (host byte order).
var one = [8]byte{1}

// wake rings the doorbell if its node sleeps: a system call only then, and only by the first producer to see the
// flag up. That producer lowers the flag itself (compare-and-swap) before it rings. Otherwise the flag stays up
// until the woken goroutine runs again, which takes tens of microseconds on a loaded box, and every message
// meanwhile would pay a system call (one message in twenty did, in a 0-byte ping-pong between two node processes
// whose ranks poll the rings themselves, while each node's progress goroutine slept).
//
// No wake-up is lost: a producer that finds the flag down published its entry before reading the flag. Either the
// flag was lowered by another producer, who rings, or the sleeper raises it again after that read. The sleeper
// looks for work after raising it (Wait), and the atomics are sequentially consistent, so it sees the entry. A
// ring is never lost either: the eventfd's count keeps it until the sleeper reads it, however late it sleeps.
func (b bell) wake() {
	s := u32(b.ctl, ctlSleeping)
	if atomic.LoadUint32(s) == 0 || !atomic.CompareAndSwapUint32(s, 1, 0) {
		return
	}
	b.ring()
}

// ring adds one to the eventfd's count, which makes it readable. The descriptor is non-blocking (the open file
// description, shared with the sleeper, says so): the only failure, EAGAIN, means a count so high that the
// eventfd is readable anyway. It cannot block, so it is a raw system call: an ordinary one tells the scheduler,
// which wakes sysmon if it slept (all Ps idle) and sets it polling every 20 µs again for a millisecond.
func (b bell) ring() {
	unix.RawSyscall(unix.SYS_WRITE, uintptr(b.fd), uintptr(unsafe.Pointer(&one[0])), uintptr(len(one)))
}

// doorbell is the sleeping end: this node's control page and eventfd, the latter as an *os.File in Go's
// netpoller. A goroutine that sleeps in it is parked like one reading a socket: its thread and P go to other
// goroutines at once. Sleeping in a system call (a futex, as this provider once did) kept the P until sysmon took
// it back, 20 µs to 10 ms later; each such retake made sysmon poll every 20 µs again, and in NPB CG across two
// node processes nine in ten of its retakes were of that sleep, with a context switch for each.
type doorbell struct {
	ctl  []byte
	f    *os.File
	rc   syscall.RawConn
	fd   int
	buf  [8]byte
	take func(fd uintptr) bool // reads the count; false while there is none (made once: no allocation a sleep)
}

// newDoorbell makes an eventfd (non-blocking, so that the netpoller takes it, and so that no ring ever blocks)
// for the control page ctl.
func newDoorbell(ctl []byte) (*doorbell, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("shm: eventfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "gompj-shm-doorbell")
	rc, err := f.SyscallConn()
	if err == nil {
		err = f.SetReadDeadline(time.Time{})
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("shm: the eventfd is not in the netpoller: %w", err)
	}
	d := &doorbell{ctl: ctl, f: f, rc: rc, fd: fd}
	// A read of a non-blocking eventfd cannot block either: a raw system call, as for ring.
	d.take = func(fd uintptr) bool {
		_, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&d.buf[0])), uintptr(len(d.buf)))
		return e != unix.EAGAIN
	}
	return d, nil
}

// bell is the doorbell's ringing end in this process.
func (d *doorbell) bell() bell { return bell{ctl: d.ctl, fd: d.fd} }

// sleep waits until the doorbell rings (its count is taken), timeout passes, or the eventfd is closed. The caller
// has raised the sleeping flag and looked for work after it, so a producer that published since rings (see wake).
// A ring that came after the caller's last sleep ended (a producer that lowered the flag just as the sleeper woke
// for another reason) ends this one at once: one spurious round of polling, never a lost wake-up.
func (d *doorbell) sleep(timeout time.Duration) {
	if d.f.SetReadDeadline(time.Now().Add(timeout)) != nil {
		return
	}
	d.rc.Read(d.take) // parks in the netpoller until the eventfd is readable, the deadline or Close
}

func (d *doorbell) close() { d.f.Close() }

// checkEventfd makes sure a descriptor a peer sent as its doorbell is a non-blocking eventfd: a file of the anonymous
// inode every eventfd shares (that of this node's own, mine) opened non-blocking, so that ringing it can neither
// write into a real file nor block. Where /proc is mounted, its link names the kind of the file too.
func checkEventfd(fd, mine int) error {
	var st, own unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("shm: fstat of the peer's doorbell: %w", err)
	}
	if err := unix.Fstat(mine, &own); err != nil {
		return fmt.Errorf("shm: fstat of this node's doorbell: %w", err)
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil || st.Dev != own.Dev || st.Ino != own.Ino || fl&unix.O_NONBLOCK == 0 || fl&unix.O_ACCMODE != unix.O_RDWR {
		return fmt.Errorf("shm: the peer's doorbell is not a non-blocking eventfd (flags %#x, %v)", fl, err)
	}
	if l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err == nil && l != "anon_inode:[eventfd]" {
		return fmt.Errorf("shm: the peer's doorbell is %s, not an eventfd", l)
	}
	return nil
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
		got, _, e := cmaSyscall(n, call, uintptr(pid), uintptr(unsafe.Pointer(&liov[0])),
			uintptr(k), uintptr(unsafe.Pointer(&riov)), 1)
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

// cmaRawMax is the largest copy made as a raw system call. A copy this short takes ~15 µs here, less than sysmon
// would let pass before it took the P back; as an ordinary system call it also tells the scheduler, which wakes
// sysmon if it slept (all Ps idle) and sets it polling every 20 µs again for a millisecond: in NPB CG across two
// node processes, almost every such wake-up came from a CMA copy once the doorbell had moved to the netpoller.
// Longer copies are ordinary system calls, so that the P goes to other goroutines while the kernel copies.
const cmaRawMax = 64 << 10

// cmaSyscall makes a process_vm_readv/writev call moving n bytes: raw when it is short (see cmaRawMax).
func cmaSyscall(n int, call, a1, a2, a3, a4, a5 uintptr) (uintptr, uintptr, unix.Errno) {
	if n <= cmaRawMax {
		return unix.RawSyscall6(call, a1, a2, a3, a4, a5, 0)
	}
	return unix.Syscall6(call, a1, a2, a3, a4, a5, 0)
}

// cmaIov is how many local iovecs cmaCopyv hands the kernel a call.
const cmaIov = 64

// cmaCopy moves len(local) bytes between local and raddr in process pid: a write when write is set, else a read.
// It loops over partial transfers. A long copy (it copies, and faults pages in) is an ordinary system call that
// lets the scheduler run other goroutines meanwhile; a short one is raw (cmaSyscall).
func cmaCopy(write bool, pid int, local []byte, raddr uint64) error {
	call := unix.SYS_PROCESS_VM_READV
	if write {
		call = unix.SYS_PROCESS_VM_WRITEV
	}
	for len(local) > 0 {
		liov := unix.Iovec{Base: &local[0]}
		liov.SetLen(len(local))
		riov := unix.RemoteIovec{Base: uintptr(raddr), Len: len(local)}
		n, _, e := cmaSyscall(len(local), uintptr(call), uintptr(pid), uintptr(unsafe.Pointer(&liov)), 1,
			uintptr(unsafe.Pointer(&riov)), 1)
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
