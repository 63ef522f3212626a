package ofi

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// This file is the provider's own wire format, pure Go and in every build so that its decoders are fuzzed
// without libfabric: the word each message carries, the control messages, and the address blob of the bootstrap.

// Every message carries a 32-bit word (in the tag with FI_TAGGED, as remote CQ data with FI_MSG): the sending
// node, and whether the message is the device's or the provider's own control message. The sender cannot be
// learnt otherwise (FI_SOURCE is rare among RDM providers and costs an address lookup per message).
//
//	bit 31     control
//	bits 28-30 control kind (0 for the device's messages)
//	bits 0-27  the sending node
const (
	wordCtl   = 1 << 31
	kindShift = 28
	nodeMask  = 1<<kindShift - 1
	// MaxNodes is the largest job the word can name.
	MaxNodes = nodeMask + 1
)

// Control kinds.
const (
	ctlHello = 1 // the sender is up and reaches this node; payload: helloMsg
	ctlBeat  = 2 // heartbeat, no payload
	ctlBye   = 3 // the sender closes its endpoint; payload: u64 number of device messages it sent here
	ctlAck   = 4 // the sender took a goodbye and will send nothing more to its sender, no payload
)

func dataWord(node int) uint32 { return uint32(node) }

func ctlWord(kind, node int) uint32 { return wordCtl | uint32(kind)<<kindShift | uint32(node) }

// parseWord splits a word as received (tags are 64 bits): ok is false for bits no sender sets.
func parseWord(w uint64) (kind, node int, ok bool) {
	if w>>32 != 0 {
		return 0, 0, false
	}
	node = int(w & nodeMask)
	kind = int(w>>kindShift) & 7
	if w&wordCtl == 0 {
		return 0, node, kind == 0
	}
	return kind, node, kind >= ctlHello && kind <= ctlAck
}

// helloMsg: magic "GOFI", version, three zero bytes, then the first 8 bytes of SHA-256 of the job secret, so that
// a node of another job reusing an address is refused instead of being talked to.
const (
	helloLen     = 16
	helloVersion = 1
	byeLen       = 8
)

var helloMagic = [4]byte{'G', 'O', 'F', 'I'}

func secretDigest(secret []byte) [8]byte {
	h := sha256.Sum256(append([]byte("gompj ofi hello\x00"), secret...))
	var d [8]byte
	copy(d[:], h[:8])
	return d
}

func helloMsg(digest [8]byte) []byte {
	b := make([]byte, helloLen)
	copy(b, helloMagic[:])
	b[4] = helloVersion
	copy(b[8:], digest[:])
	return b
}

// checkHello verifies a peer's hello against this job's digest.
func checkHello(b []byte, digest [8]byte) error {
	switch {
	case len(b) != helloLen:
		return fmt.Errorf("a hello of %d bytes (want %d)", len(b), helloLen)
	case !bytes.Equal(b[:4], helloMagic[:]) || b[5] != 0 || b[6] != 0 || b[7] != 0:
		return errors.New("a hello that is not gompj's")
	case b[4] != helloVersion:
		return fmt.Errorf("a hello of version %d (this node speaks %d)", b[4], helloVersion)
	case !bytes.Equal(b[8:], digest[:]):
		return errors.New("a hello from another job (its secret differs)")
	}
	return nil
}

func byeMsg(sent uint64) []byte { return binary.LittleEndian.AppendUint64(nil, sent) }

func parseBye(b []byte) (uint64, error) {
	if len(b) != byeLen {
		return 0, fmt.Errorf("a goodbye of %d bytes (want %d)", len(b), byeLen)
	}
	return binary.LittleEndian.Uint64(b), nil
}

// The address blob is what node publishes through the bootstrap:
//
//	0  4  magic "GOFA"
//	4  1  version 1
//	5  1  1: FI_TAGGED (the word in the tag), 0: FI_MSG (the word as CQ data)
//	6  2  zero
//	8  4  libfabric address format (fi_info.addr_format)
//	12 1  length n of the provider's name, then the name
//	   2  length m of the address, then the address (fi_getname)
//
// Both ends must run the same provider in the same mode with the same address format: anything else could not
// talk, so it is refused at Connect with a message that says what differs.
const (
	addrVersion = 1
	maxAddr     = 4096 // rdma.Endpoint.Address's bound
	// fabric.h's FI_SOCKADDR (struct sockaddr of either family) and FI_ADDR_STR (a NUL-terminated string).
	fiSockaddr = 1
	fiAddrStr  = 9
)

var addrMagic = [4]byte{'G', 'O', 'F', 'A'}

type addrInfo struct {
	tagged bool
	format uint32
	prov   string
	name   []byte
}

func encodeAddr(a addrInfo) ([]byte, error) {
	if len(a.prov) > 255 {
		return nil, fmt.Errorf("ofi: provider name of %d bytes", len(a.prov))
	}
	if len(a.name) == 0 || 15+len(a.prov)+len(a.name) > maxAddr {
		return nil, fmt.Errorf("ofi: endpoint name of %d bytes", len(a.name))
	}
	b := make([]byte, 0, 15+len(a.prov)+len(a.name))
	b = append(b, addrMagic[:]...)
	b = append(b, addrVersion, 0, 0, 0)
	if a.tagged {
		b[5] = 1
	}
	b = binary.LittleEndian.AppendUint32(b, a.format)
	b = append(b, byte(len(a.prov)))
	b = append(b, a.prov...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(a.name)))
	return append(b, a.name...), nil
}

func decodeAddr(b []byte) (addrInfo, error) {
	var a addrInfo
	if len(b) < 15 || !bytes.Equal(b[:4], addrMagic[:]) {
		return a, errors.New("not an ofi address")
	}
	if b[4] != addrVersion {
		return a, fmt.Errorf("an ofi address of version %d (this node speaks %d)", b[4], addrVersion)
	}
	if b[5] > 1 || b[6] != 0 || b[7] != 0 {
		return a, errors.New("an ofi address with unknown flags")
	}
	a.tagged = b[5] == 1
	a.format = binary.LittleEndian.Uint32(b[8:])
	n := int(b[12])
	rest := b[13:]
	if len(rest) < n+2 {
		return a, errors.New("a truncated ofi address")
	}
	a.prov = string(rest[:n])
	rest = rest[n:]
	m := int(binary.LittleEndian.Uint16(rest))
	rest = rest[2:]
	if m == 0 || len(rest) != m {
		return a, fmt.Errorf("an ofi address whose name claims %d bytes and has %d", m, len(rest))
	}
	a.name = rest
	return a, nil
}

// compatible checks a peer's address against this endpoint's: same provider, mode and format, and a name that
// the address format reads whole (libfabric takes a fixed-size name for every format but strings and generic
// socket addresses, so a peer's name must be as long as this node's).
func (a addrInfo) compatible(peer addrInfo) error {
	switch {
	case peer.prov != a.prov:
		return fmt.Errorf("it runs libfabric provider %q, this node %q (set the same FI_PROVIDER everywhere)", peer.prov, a.prov)
	case peer.tagged != a.tagged:
		return fmt.Errorf("it uses %s, this node %s", apiName(peer.tagged), apiName(a.tagged))
	case peer.format != a.format:
		return fmt.Errorf("its address format is %d, this node's %d (IPv4 and IPv6 fabrics mixed?)", peer.format, a.format)
	}
	switch a.format {
	case fiAddrStr:
		if i := bytes.IndexByte(peer.name, 0); i <= 0 {
			return errors.New("its address string is empty or not terminated")
		}
	case fiSockaddr:
		// struct sockaddr_in or sockaddr_in6: the family (first two bytes, host order) says which.
		if len(peer.name) != 16 && len(peer.name) != 28 {
			return fmt.Errorf("a socket address of %d bytes", len(peer.name))
		}
	default:
		if len(peer.name) != len(a.name) {
			return fmt.Errorf("an address of %d bytes where this provider's are %d", len(peer.name), len(a.name))
		}
	}
	return nil
}

func apiName(tagged bool) string {
	if tagged {
		return "FI_TAGGED"
	}
	return "FI_MSG"
}
