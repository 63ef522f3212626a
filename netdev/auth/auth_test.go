package auth

import (
	"errors"
	"net"
	"testing"
	"time"
)

var k1 = []byte("0123456789abcdef0123456789abcdef")

func pair(t *testing.T, acceptSecret, dialSecret []byte, acceptPurpose, dialPurpose string) (Hello, error, error) {
	t.Helper()
	a, d := net.Pipe()
	defer a.Close()
	defer d.Close()
	type res struct {
		h   Hello
		err error
	}
	ch := make(chan res, 1)
	go func() {
		h, err := Accept(a, acceptSecret, acceptPurpose, time.Second)
		if err != nil {
			a.Close()
		}
		ch <- res{h, err}
	}()
	derr := Dial(d, dialSecret, dialPurpose, Hello{From: 3, To: 1, Stripe: 2}, time.Second)
	if derr != nil {
		d.Close()
	}
	r := <-ch
	return r.h, r.err, derr
}

func TestHandshake(t *testing.T) {
	h, aerr, derr := pair(t, k1, k1, "netdev", "netdev")
	if aerr != nil || derr != nil || h != (Hello{From: 3, To: 1, Stripe: 2}) {
		t.Fatalf("good handshake: %v %v %+v", aerr, derr, h)
	}
	other := []byte("fedcba9876543210fedcba9876543210")
	if _, aerr, derr = pair(t, k1, other, "netdev", "netdev"); !errors.Is(aerr, ErrAuth) || !errors.Is(derr, ErrAuth) {
		t.Fatalf("wrong secret: accept %v, dial %v", aerr, derr)
	}
	if _, aerr, derr = pair(t, k1, k1, "netdev", "bootstrap"); !errors.Is(aerr, ErrAuth) || derr == nil {
		t.Fatalf("wrong purpose: accept %v, dial %v", aerr, derr)
	}
	if _, aerr, _ = pair(t, []byte("short"), k1, "netdev", "netdev"); aerr == nil {
		t.Fatal("short secret accepted")
	}
}
