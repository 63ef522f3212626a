// Package auth is the job-secret handshake shared by every gompj connection (node to node in netdev, node to
// coordinator in node/bootstrap).
//
// Both ends prove knowledge of the job secret with HMAC-SHA256 over fresh nonces before any other byte is read.
// The acceptor speaks first and sends only a random challenge, so a stranger who connects learns nothing it could
// reuse; the dialer answers with its identity and a MAC; only then does the acceptor prove itself in turn.
//
//	acceptor -> dialer   magic[8] | nonceA[32]                                             (40 bytes)
//	dialer   -> acceptor magic[8] | nonceD[32] | from i32 | to i32 | stripe u32 | macD[32]  (84 bytes)
//	acceptor -> dialer   macA[32]                                                          (32 bytes)
//
//	macD = HMAC(secret, "gompj-dial\x00"   | purpose | 0x00 | nonceA | nonceD | from | to | stripe)
//	macA = HMAC(secret, "gompj-accept\x00" | purpose | 0x00 | nonceA | nonceD | from | to | stripe)
//
// Integers are little-endian. The purpose label ("netdev", "bootstrap") is not sent: both ends know it, and it keeps
// a MAC made for one kind of connection from being replayed on another. MACs are compared in constant time. An
// acceptor that rejects the dialer closes the connection without sending anything more.
//
// Imports: the standard library only.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

const (
	nonceLen  = 32
	macLen    = sha256.Size
	magic     = "GOMPJAU1"
	challenge = len(magic) + nonceLen               // acceptor's first message
	answerLen = len(magic) + nonceLen + 12 + macLen // dialer's answer
	// MinSecret is the shortest job secret accepted.
	MinSecret = 16
)

// ErrAuth is wrapped by every handshake failure caused by the other end (wrong secret, garbage, wrong protocol).
var ErrAuth = errors.New("auth: handshake failed")

// Hello is what a dialer says about itself; the handshake authenticates it.
type Hello struct {
	From   int32  // the dialer's node id
	To     int32  // the node id the dialer meant to reach (-1 for a coordinator)
	Stripe uint32 // which of several parallel connections this is
}

// NewSecret returns a fresh random job secret.
func NewSecret() ([]byte, error) {
	s := make([]byte, 32)
	if _, err := rand.Read(s); err != nil {
		return nil, fmt.Errorf("auth: making a job secret: %w", err)
	}
	return s, nil
}

func checkSecret(secret []byte) error {
	if len(secret) < MinSecret {
		return fmt.Errorf("auth: job secret of %d bytes is too short (at least %d)", len(secret), MinSecret)
	}
	return nil
}

func mac(secret []byte, label, purpose string, nonceA, nonceD []byte, h Hello) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write([]byte{0})
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write(nonceA)
	m.Write(nonceD)
	var b [12]byte
	binary.LittleEndian.PutUint32(b[0:], uint32(h.From))
	binary.LittleEndian.PutUint32(b[4:], uint32(h.To))
	binary.LittleEndian.PutUint32(b[8:], h.Stripe)
	m.Write(b[:])
	return m.Sum(nil)
}

// Accept runs the acceptor's side of the handshake on c within timeout and returns the dialer's authenticated
// Hello. On error the caller should close c; nothing has been read past the handshake. The connection's deadline
// is cleared on success.
func Accept(c net.Conn, secret []byte, purpose string, timeout time.Duration) (Hello, error) {
	if err := checkSecret(secret); err != nil {
		return Hello{}, err
	}
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return Hello{}, err
	}
	var out [challenge]byte
	copy(out[:], magic)
	nonceA := out[len(magic):]
	if _, err := rand.Read(nonceA); err != nil {
		return Hello{}, fmt.Errorf("auth: nonce: %w", err)
	}
	if _, err := c.Write(out[:]); err != nil {
		return Hello{}, fmt.Errorf("%w: %s: writing challenge: %v", ErrAuth, c.RemoteAddr(), err)
	}
	var in [answerLen]byte
	if _, err := io.ReadFull(c, in[:]); err != nil {
		return Hello{}, fmt.Errorf("%w: %s: reading answer: %v", ErrAuth, c.RemoteAddr(), err)
	}
	if string(in[:len(magic)]) != magic {
		return Hello{}, fmt.Errorf("%w: %s: not a gompj peer (bad magic)", ErrAuth, c.RemoteAddr())
	}
	p := in[len(magic):]
	nonceD := p[:nonceLen]
	p = p[nonceLen:]
	h := Hello{
		From:   int32(binary.LittleEndian.Uint32(p[0:])),
		To:     int32(binary.LittleEndian.Uint32(p[4:])),
		Stripe: binary.LittleEndian.Uint32(p[8:]),
	}
	got := p[12 : 12+macLen]
	want := mac(secret, "gompj-dial", purpose, nonceA, nonceD, h)
	if !hmac.Equal(got, want) {
		return Hello{}, fmt.Errorf("%w: %s: wrong job secret", ErrAuth, c.RemoteAddr())
	}
	if _, err := c.Write(mac(secret, "gompj-accept", purpose, nonceA, nonceD, h)); err != nil {
		return Hello{}, fmt.Errorf("%w: %s: writing proof: %v", ErrAuth, c.RemoteAddr(), err)
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return Hello{}, err
	}
	return h, nil
}

// Dial runs the dialer's side of the handshake on c within timeout, announcing h. It fails if the acceptor does not
// prove the same secret. The connection's deadline is cleared on success.
func Dial(c net.Conn, secret []byte, purpose string, h Hello, timeout time.Duration) error {
	if err := checkSecret(secret); err != nil {
		return err
	}
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	var ch [challenge]byte
	if _, err := io.ReadFull(c, ch[:]); err != nil {
		return fmt.Errorf("%w: %s: reading challenge: %v", ErrAuth, c.RemoteAddr(), err)
	}
	if string(ch[:len(magic)]) != magic {
		return fmt.Errorf("%w: %s: not a gompj endpoint (bad magic)", ErrAuth, c.RemoteAddr())
	}
	nonceA := ch[len(magic):]
	var out [answerLen]byte
	copy(out[:], magic)
	nonceD := out[len(magic) : len(magic)+nonceLen]
	if _, err := rand.Read(nonceD); err != nil {
		return fmt.Errorf("auth: nonce: %w", err)
	}
	p := out[len(magic)+nonceLen:]
	binary.LittleEndian.PutUint32(p[0:], uint32(h.From))
	binary.LittleEndian.PutUint32(p[4:], uint32(h.To))
	binary.LittleEndian.PutUint32(p[8:], h.Stripe)
	copy(p[12:], mac(secret, "gompj-dial", purpose, nonceA, nonceD, h))
	if _, err := c.Write(out[:]); err != nil {
		return fmt.Errorf("%w: %s: writing answer: %v", ErrAuth, c.RemoteAddr(), err)
	}
	var proof [macLen]byte
	if _, err := io.ReadFull(c, proof[:]); err != nil {
		return fmt.Errorf("%w: %s: the acceptor refused us (wrong secret, or not the node we meant): %v", ErrAuth, c.RemoteAddr(), err)
	}
	if !hmac.Equal(proof[:], mac(secret, "gompj-accept", purpose, nonceA, nonceD, h)) {
		return fmt.Errorf("%w: %s: the acceptor does not know the job secret", ErrAuth, c.RemoteAddr())
	}
	return c.SetDeadline(time.Time{})
}
