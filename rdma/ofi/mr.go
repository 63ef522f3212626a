//go:build ofi

package ofi

/*
#include "gofi.h"
*/
import "C"

import (
	"errors"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/gompj/gompj/rdma"
)

// mr is a registration: the buffer stays pinned until Close (libfabric, and the NIC behind it, keep its address).
type mr struct {
	e    *endpoint
	c    *C.struct_fid_mr
	key  uint64
	desc unsafe.Pointer
	base uintptr
	n    int
	pin  runtime.Pinner
	dead atomic.Bool
}

func (m *mr) Key() uint64 { return m.key }

func (m *mr) Desc() unsafe.Pointer { return m.desc }

func (m *mr) Addr(p unsafe.Pointer) uint64 {
	if m.e.caps.VirtAddr {
		return uint64(uintptr(p))
	}
	return uint64(uintptr(p) - m.base)
}

// Close deregisters and unpins. After the endpoint closed it has nothing left to do (Close released every
// registration).
func (m *mr) Close() error {
	e := m.e
	e.mrMu.Lock()
	if _, ok := e.mrs[m]; !ok {
		e.mrMu.Unlock()
		if m.dead.Load() && e.closed.Load() {
			return nil
		}
		return &rdma.OpError{Call: "fi_close(mr)", Node: -1, Err: errors.New("the registration is closed already")}
	}
	delete(e.mrs, m)
	m.dead.Store(true)
	e.mrMu.Unlock()
	var err error
	if e.enter() {
		if ret := C.gofi_mr_close(m.c); ret != 0 {
			err = &rdma.OpError{Call: "fi_close(mr)", Node: -1, Err: fiErr(C.ssize_t(ret))}
		}
		e.leave()
	}
	m.pin.Unpin()
	return err
}

// Register implements rdma.Endpoint. b's memory is pinned for the registration's life.
func (e *endpoint) Register(b []byte, acc rdma.Access) (rdma.MR, error) {
	if len(b) == 0 {
		return nil, &rdma.OpError{Call: "fi_mr_reg", Node: -1, Err: errors.New("registering no memory")}
	}
	var access C.uint64_t
	if acc&rdma.AccessLocal != 0 {
		access |= C.FI_SEND | C.FI_RECV | C.FI_READ | C.FI_WRITE
	}
	if acc&rdma.AccessRemoteRead != 0 {
		access |= C.FI_REMOTE_READ
	}
	if acc&rdma.AccessRemoteWrite != 0 {
		access |= C.FI_REMOTE_WRITE
	}
	if access == 0 {
		return nil, &rdma.OpError{Call: "fi_mr_reg", Node: -1, Err: errors.New("a registration allowing nothing")}
	}
	var key uint64
	if e.mrMode&C.FI_MR_PROV_KEY == 0 {
		key = keyNext.Add(1) // the provider wants keys chosen by the application: unique in the process
	}
	m := &mr{e: e, base: uintptr(unsafe.Pointer(&b[0])), n: len(b)}
	m.pin.Pin(&b[0])
	if !e.enter() {
		m.pin.Unpin()
		return nil, &rdma.OpError{Call: "fi_mr_reg", Node: -1, Err: errClosed}
	}
	defer e.leave()
	ret := C.gofi_mr_reg(e.c, addr(unsafe.Pointer(&b[0])), C.size_t(len(b)), access, C.uint64_t(key), &m.c)
	if ret != 0 {
		m.pin.Unpin()
		return nil, &rdma.OpError{Call: "fi_mr_reg", Node: -1, Err: fiErr(C.ssize_t(ret))}
	}
	m.key = uint64(C.gofi_mr_key(m.c))
	m.desc = C.gofi_mr_desc(m.c)
	if m.key == C.FI_KEY_NOTAVAIL {
		C.gofi_mr_close(m.c)
		m.pin.Unpin()
		return nil, &rdma.OpError{Call: "fi_mr_key", Node: -1, Err: errors.New("the provider's keys do not fit 64 bits (FI_MR_RAW)")}
	}
	e.mrMu.Lock()
	e.mrs[m] = struct{}{}
	e.mrMu.Unlock()
	return m, nil
}

// keyNext numbers the keys of providers that let the application choose them (FI_MR_PROV_KEY unset). Keys need
// only be unique in a domain; unique in the process, they cannot be mistaken between endpoints that share
// memory in one process either.
var keyNext atomic.Uint64
