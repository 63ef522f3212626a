package node

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/node/bootstrap"
	"github.com/gompj/gompj/ranks"
)

// lossyTransport is a device that connects at once, carries nothing, and on node 0 reports node 1 lost once the
// ranks run: a device's own report of a peer it can no longer reach, with the coordinator none the wiser.
type lossyTransport struct {
	node int
	sink device.Sink
}

func (l *lossyTransport) SendEager(*device.Header, []byte, device.Completer) error {
	return errors.New("lossy: no traffic")
}
func (l *lossyTransport) SendRendezvous(*device.Header, []byte, device.Completer) error {
	return errors.New("lossy: no traffic")
}
func (l *lossyTransport) ClearToSend(*device.Header, []byte, device.Completer) error {
	return errors.New("lossy: no traffic")
}
func (l *lossyTransport) Ack(*device.Header) error                  { return errors.New("lossy: no traffic") }
func (l *lossyTransport) EagerLimit(int) int                        { return 0 }
func (l *lossyTransport) Close() error                              { return nil }
func (l *lossyTransport) Address() []byte                           { return []byte("lossy") }
func (l *lossyTransport) WaitConnected(time.Duration) error         { return nil }
func (l *lossyTransport) Start(s device.Sink, addrs [][]byte) error { l.sink = s; return nil }

// TestDevicePeerLostAbortsJob: the World is every device's sink, so a device's PeerLost aborts the job with an
// error naming the lost node and the device's reason (it used to stop at the node's lateSink).
func TestDevicePeerLostAbortsJob(t *testing.T) {
	saved := devices
	defer func() { devices = saved }()
	devices = registry{}
	var mu sync.Mutex
	trs := map[int]*lossyTransport{}
	devices.add(deviceEntry{name: DevTCP, summary: "lossy", open: func(s *openSpec) (device.Transport, error) {
		mu.Lock()
		defer mu.Unlock()
		l := &lossyTransport{node: s.cfg.NodeID}
		trs[s.cfg.NodeID] = l
		return l, nil
	}})
	co, err := bootstrap.NewCoordinator(bootstrap.CoordinatorConfig{Addr: "127.0.0.1:0", Nodes: 2, Secret: testSecret, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Run(Config{Ranks: 2, Nodes: 2, NodeID: i, Coordinator: co.Addr(), Secret: testSecret,
				Timeout: 20 * time.Second, NoHostSHM: true}, func(c *ranks.Comm) error {
				if c.Rank() == 0 {
					mu.Lock()
					l := trs[0]
					mu.Unlock()
					l.sink.PeerLost(1, errors.New("lossy: the link went down"))
				}
				_, err := c.Recv(make([]byte, 1), 1-c.Rank(), 0) // never satisfied: the abort ends it
				return err
			})
		}()
	}
	wg.Wait()
	var re *RemoteError
	if !errors.As(errs[0], &re) || re.Node != 1 || !re.Lost || !errors.Is(errs[0], ErrNodeLost) ||
		!strings.Contains(errs[0].Error(), "lossy: the link went down") {
		t.Fatalf("node 0: %v, want the device's loss of node 1", errs[0])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "lossy: the link went down") {
		t.Fatalf("node 1: %v, want node 0's abort with the device's reason", errs[1])
	}
}
