package ranks

import (
	"testing"

	"github.com/gompj/gompj/queues"
)

// BenchmarkCollRequest: a small collective's request, taken, completed by its run and reported by Wait, in a loop
// on one rank: the request's own cost in every 8-byte nonblocking collective inside a node.
func BenchmarkCollRequest(b *testing.B) {
	c := benchComm(b)
	for b.Loop() {
		r := c.CollRequest()
		CompleteColl(r, nil)
		if _, err := r.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCollRequestDone is BenchmarkCollRequest for a run over at its start (CollRequestDone).
func BenchmarkCollRequestDone(b *testing.B) {
	c := benchComm(b)
	for b.Loop() {
		if _, err := c.CollRequestDone().Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchComm(b *testing.B) *Comm {
	w, err := NewWorld(Options{Size: 1, Lo: 0, Hi: 1, EagerLimit: 64 << 10, Policy: queues.DefaultPolicy(1)})
	if err != nil {
		b.Fatal(err)
	}
	return w.Comm(0)
}
