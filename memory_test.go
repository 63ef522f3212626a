package gompj_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

// Alloc's memory in the harness's modes: point-to-point messages of every protocol (eager, rendezvous, a split
// copy) and an alltoall between ranks of different node processes, from and into Alloc'd memory, Go memory on
// the other side too, then Free. In the shm mode the memory is the node's shared segment (TestAllocShared).
func TestModesAlloc(t *testing.T) {
	harness.Run(t, 4, func(c *gompj.Comm) error {
		me, np := c.Rank(), c.Size()
		for _, n := range []int{0, 1, 4<<10 + 1, 300 << 10, 1<<20 + 3} { // float64s
			send, err := gompj.Alloc[float64](c, n)
			if err != nil {
				return err
			}
			recv, err := gompj.Alloc[float64](c, n)
			if err != nil {
				return err
			}
			goRecv := make([]float64, n)
			for i := range send {
				send[i] = float64(me*1e7 + i)
			}
			peer := (me + np/2) % np // in another node process in the multi-process modes
			// Alloc'd to Alloc'd, then Alloc'd to Go memory.
			for k, into := range [][]float64{recv, goRecv} {
				r, err := c.Irecv(into, peer, k)
				if err != nil {
					return err
				}
				if err := c.Send(send, peer, k); err != nil {
					return err
				}
				if _, err := r.Wait(); err != nil {
					return err
				}
				for i := range into {
					if want := float64(peer*1e7 + i); into[i] != want {
						return fmt.Errorf("%d float64s from %d (into %d): [%d] = %v, want %v", n, peer, k, i, into[i], want)
					}
				}
			}
			if err := gompj.Free(c, send); err != nil {
				return err
			}
			if err := gompj.Free(c, recv); err != nil {
				return err
			}
		}
		const per = 70 << 10 // int32s per pair: rendezvous between node processes
		s, err := gompj.Alloc[int32](c, per*np)
		if err != nil {
			return err
		}
		r, err := gompj.Alloc[int32](c, per*np)
		if err != nil {
			return err
		}
		for i := range s {
			s[i] = int32(me<<24 + i)
		}
		if err := c.Alltoall(s, r); err != nil {
			return err
		}
		for src := 0; src < np; src++ {
			for i := 0; i < per; i += 97 {
				if want := int32(src<<24 + me*per + i); r[src*per+i] != want {
					return fmt.Errorf("alltoall: from %d [%d] = %d, want %d", src, i, r[src*per+i], want)
				}
			}
		}
		if err := gompj.Free(c, s); err != nil {
			return err
		}
		if err := gompj.Free(c, r); err != nil {
			return err
		}
		if err := gompj.Free(c, make([]int, 10)); err != nil { // Go memory: nothing to do
			return fmt.Errorf("Free of Go memory: %w", err)
		}
		if _, err := gompj.Alloc[byte](c, -1); !errors.Is(err, gompj.ErrArg) {
			return fmt.Errorf("Alloc(-1): %v, want ErrArg", err)
		}
		return nil
	})
	if _, err := gompj.Alloc[byte](nil, 1); !errors.Is(err, gompj.ErrComm) {
		t.Fatalf("Alloc on a nil communicator: %v, want ErrComm", err)
	}
}

// TestAllocShared: with node processes sharing memory, Alloc's memory is a part of the node's shared segment (a
// memfd mapping, /proc/self/maps says); in a job of one node process it is Go memory.
func TestAllocShared(t *testing.T) {
	check := func(wantShared bool) func(c *gompj.Comm) error {
		return func(c *gompj.Comm) error {
			b, err := gompj.Alloc[complex128](c, 1000)
			if err != nil {
				return err
			}
			defer gompj.Free(c, b)
			name, err := mappingOf(uintptr(unsafe.Pointer(&b[0])))
			if err != nil {
				return err
			}
			if shared := strings.Contains(name, "memfd:gompj-node"); shared != wantShared {
				return fmt.Errorf("Alloc's memory is in mapping %q; shared %v, want %v", name, shared, wantShared)
			}
			return nil
		}
	}
	t.Run("onenode", func(t *testing.T) {
		if err := gompj.RunWith(gompj.Config{Ranks: 2, Nodes: 1}, check(false)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("shm", func(t *testing.T) {
		harness.Procs(t, harness.Spec{Ranks: 2, Nodes: 2, HostSHM: true}, check(true)).Check(t)
	})
}

// mappingOf returns the name /proc/self/maps gives the mapping holding addr ("" for an anonymous one).
func mappingOf(addr uintptr) (string, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || uint64(addr) < l || uint64(addr) >= h {
			continue
		}
		if len(fields) >= 6 {
			return strings.Join(fields[5:], " "), nil
		}
		return "", nil
	}
	return "", fmt.Errorf("no mapping holds %#x", addr)
}
