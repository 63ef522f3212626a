//go:build linux

package shm

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/rdma"
)

// A rendezvous long enough to be split completes at its receiver while nothing polls the sender's device (its
// rank computes, and its progress goroutine stands down for a driver that never polls): the receiver, its own
// part in, claims the sender's part and Reads it too. The sender completes once its device is polled again. With
// the split that waited for the sender's Write, the receive waited as long as the sender computed.
func TestSplitWithoutSender(t *testing.T) {
	devs, _ := devicePair(t, Options{})
	const size = 2 * rdma.DefaultSplitMin
	sinks := connectPing(t, devs, size)
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i*7 + i>>11)
	}
	devs[0].Enter() // a driver that never polls
	leave := sync.OnceFunc(func() { devs[0].Leave(true) })
	defer leave()
	var sent doneFlag
	h := &device.Header{Kind: device.KindRTS, Type: 1, Source: 0, Dest: 1, SrcRank: 0, Length: size}
	if err := devs[0].SendRendezvous(h, payload, &sent); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for sinks[1].got.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the receive waited for a sender whose device nobody polls")
		}
		runtime.Gosched()
	}
	if !bytes.Equal(*sinks[1].buf.Load(), payload) {
		t.Fatal("the receiver's buffer differs from the payload")
	}
	if sent.n.Load() != 0 {
		t.Fatal("the send completed while nothing polled its device")
	}
	leave()
	for sent.n.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the send never completed once its device was polled again")
		}
		runtime.Gosched()
	}
}

// Claim words: each is taken once, by its own node or by a peer through its mapping of the control page; a node
// runs out of them (the device then does not split); a token naming no word is an error; a closed word opens
// again, untaken.
func TestClaimWords(t *testing.T) {
	eps := lendPair(t, false)
	var toks []uint64
	for {
		tok, ok := eps[0].OpenClaim()
		if !ok {
			break
		}
		toks = append(toks, tok)
	}
	if len(toks) != claimWords {
		t.Fatalf("opened %d claim words, want %d", len(toks), claimWords)
	}
	for i, tok := range toks {
		first, second := eps[1], eps[0] // the receiver (through its mapping) claims first, or the sender itself
		if i%2 == 1 {
			first, second = eps[0], eps[1]
		}
		if won, err := first.Claim(0, tok); !won || err != nil {
			t.Fatalf("word %d: the first claim got %v, %v", tok, won, err)
		}
		if won, err := second.Claim(0, tok); won || err != nil {
			t.Fatalf("word %d: the second claim got %v, %v", tok, won, err)
		}
	}
	if _, err := eps[1].Claim(0, claimWords); err == nil {
		t.Fatal("a token past the words was accepted")
	}
	if _, err := eps[1].Claim(5, 0); err == nil {
		t.Fatal("a claim on a node that is not connected was accepted")
	}
	eps[0].CloseClaim(toks[3])
	tok, ok := eps[0].OpenClaim()
	if !ok || tok != toks[3] {
		t.Fatalf("reopened %d, %v; want word %d", tok, ok, toks[3])
	}
	if won, err := eps[1].Claim(0, tok); !won || err != nil {
		t.Fatalf("a reopened word: %v, %v", won, err)
	}
}
