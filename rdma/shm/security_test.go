//go:build linux

package shm

import (
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gompj/gompj/netdev/auth"
	"github.com/gompj/gompj/rdma"
)

func listDevShm(t *testing.T) []string {
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestSegmentPrivate: the segment is an anonymous memfd readable only by its user, sealed against shrinking;
// nothing appears in /dev/shm.
func TestSegmentPrivate(t *testing.T) {
	before := listDevShm(t)
	ep, err := Provider{}.Open(rdma.EndpointConfig{Node: 0, Nodes: 2, Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	e := ep.(*endpoint)
	var st unix.Stat_t
	if err := unix.Fstat(e.seg.fd, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o777 != 0o600 {
		t.Errorf("segment mode %o, want 600", st.Mode&0o777)
	}
	seals, err := unix.FcntlInt(uintptr(e.seg.fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		t.Errorf("segment seals %#x (%v): not sealed against shrinking", seals, err)
	}
	if after := listDevShm(t); !slices.Equal(before, after) {
		t.Errorf("/dev/shm changed: %v -> %v", before, after)
	}
	ep.Close()
}

// TestStrangersRefused: a connection without the job secret, or claiming a node it may not be, gets no segment.
func TestStrangersRefused(t *testing.T) {
	ep, err := Provider{Opts: Options{HandshakeTimeout: time.Second}}.Open(rdma.EndpointConfig{Node: 1, Nodes: 3, Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	e := ep.(*endpoint)
	if err := ep.Connect(0, (&endpoint{name: "gompj-shm-nobody"}).Address()); err != nil {
		t.Fatal(err)
	}
	try := func(secret []byte, from, to int32) {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: "@" + e.name, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		err = auth.Dial(c, secret, Purpose, auth.Hello{From: from, To: to}, time.Second)
		if err == nil {
			// Authenticated, but not as a node that may dial this one: the endpoint closes without a hello.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			var b [helloSize]byte
			oob := make([]byte, unix.CmsgSpace(4))
			n, oobn, _, _, rerr := c.ReadMsgUnix(b[:], oob)
			if n != 0 || oobn != 0 || rerr == nil {
				t.Errorf("from %d to %d: got %d bytes and %d of control (%v)", from, to, n, oobn, rerr)
			}
		}
	}
	try([]byte("not-the-job-secret-at-all-000000"), 0, 1)
	try(testSecret, 2, 1) // node 2 does not dial node 1: node 1 dials it
	try(testSecret, 0, 2) // meant for another node
	if err := ep.Ready(100 * time.Millisecond); err == nil {
		t.Fatal("a stranger became a peer")
	}
}

// TestUnsealedSegmentRefused: a peer's segment that could be truncated under our mappings is not mapped.
func TestUnsealedSegmentRefused(t *testing.T) {
	fd, err := unix.MemfdCreate("plain", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Ftruncate(fd, 1<<20)
	if _, err := mapPeer(fd, pageSize, int64(ringBytes(minCells))); err == nil {
		t.Fatal("an unsealed segment was mapped")
	}
}

// TestRingPastSegmentRefused: a hello whose ring lies past the segment is refused by the bounds check, also when
// offset plus length overflows.
func TestRingPastSegmentRefused(t *testing.T) {
	s, err := newSegment(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	n := int64(ringBytes(minCells))
	if _, _, err := s.addRing(int(n)); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{s.size, s.size - n + pageSize, math.MaxInt64 &^ (pageSize - 1)} {
		if _, err := mapPeer(s.fd, off, n); err == nil || !strings.Contains(err.Error(), "announces a ring") {
			t.Errorf("a ring of %d bytes at %d in a segment of %d: %v", n, off, s.size, err)
		}
	}
	m, err := mapPeer(s.fd, pageSize, n)
	if err != nil {
		t.Fatal(err)
	}
	m.close()
}
