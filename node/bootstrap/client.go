package bootstrap

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/gompj/gompj/netdev/auth"
)

// ErrAborted is wrapped by *AbortError.
var ErrAborted = errors.New("bootstrap: job aborted")

// AbortError says which node aborted the job or was lost (Node -1: the coordinator itself), with its code and reason.
type AbortError struct {
	Node   int
	Code   int
	Reason string
}

func (e *AbortError) Error() string {
	if e.Node < 0 {
		return fmt.Sprintf("bootstrap: job aborted: %s", e.Reason)
	}
	return fmt.Sprintf("bootstrap: job aborted by node %d (code %d): %s", e.Node, e.Code, e.Reason)
}

func (e *AbortError) Unwrap() error { return ErrAborted }

// ClientConfig configures a node's side of the bootstrap.
type ClientConfig struct {
	Coordinator string   // the coordinator's address
	Node        int      // this node's id
	Nodes       int      // how many nodes the job has
	Self        Endpoint // this node's host identity and device addresses, handed to the others
	Secret      []byte
	// Timeout bounds Join: reaching the coordinator (retried while it comes up) and waiting for the table
	// (default 60 s; the coordinator's own registration timeout normally fires first).
	Timeout          time.Duration
	HandshakeTimeout time.Duration // default 5 s
}

// Client is a node's connection to the coordinator, open for the whole job.
type Client struct {
	cfg   ClientConfig
	conn  net.Conn
	table []Endpoint
	wmu   sync.Mutex

	mu       sync.Mutex
	tableCh  chan error
	barriers map[string]chan error
	aborted  *AbortError
	onAbort  func(node, code int, reason string)
	leaving  bool
	done     chan struct{}
}

// Join connects to the coordinator, proves the job secret, registers and waits for the address table.
func Join(cfg ClientConfig) (*Client, error) {
	if cfg.Nodes <= 0 || cfg.Node < 0 || cfg.Node >= cfg.Nodes {
		return nil, fmt.Errorf("bootstrap: node %d of %d", cfg.Node, cfg.Nodes)
	}
	if err := checkEndpoint(&cfg.Self); err != nil {
		return nil, fmt.Errorf("bootstrap: node %d: endpoint: %w", cfg.Node, err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	deadline := time.Now().Add(cfg.Timeout)
	var nc net.Conn
	backoff := 10 * time.Millisecond
	for {
		var err error
		nc, err = net.DialTimeout("tcp", cfg.Coordinator, cfg.HandshakeTimeout)
		if err == nil {
			break
		}
		if time.Now().Add(backoff).After(deadline) {
			return nil, fmt.Errorf("bootstrap: node %d: cannot reach the coordinator at %s: %w", cfg.Node, cfg.Coordinator, err)
		}
		time.Sleep(backoff) // retry pacing while the coordinator starts
		backoff = min(2*backoff, time.Second)
	}
	if err := auth.Dial(nc, cfg.Secret, Purpose, auth.Hello{From: int32(cfg.Node), To: -1}, cfg.HandshakeTimeout); err != nil {
		nc.Close()
		return nil, fmt.Errorf("bootstrap: node %d: coordinator %s: %w", cfg.Node, cfg.Coordinator, err)
	}
	c := &Client{cfg: cfg, conn: nc, tableCh: make(chan error, 1), barriers: map[string]chan error{}, done: make(chan struct{})}
	if err := c.send(&message{Kind: msgRegister, Node: cfg.Node, Self: &cfg.Self}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("bootstrap: node %d: registering: %w", cfg.Node, err)
	}
	go c.readLoop()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case err := <-c.tableCh:
		if err != nil {
			nc.Close()
			return nil, err
		}
	case <-t.C:
		nc.Close()
		return nil, fmt.Errorf("bootstrap: node %d: no address table from %s within %v", cfg.Node, cfg.Coordinator, cfg.Timeout)
	}
	return c, nil
}

// Table is every node's endpoint (host identity and device addresses), indexed by node id.
func (c *Client) Table() []Endpoint { return c.table }

func (c *Client) send(m *message) error {
	b, err := encodeMessage(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err = c.conn.Write(b)
	return err
}

func (c *Client) readLoop() {
	defer close(c.done)
	for {
		m, err := readMessage(c.conn, c.cfg.Nodes)
		if err != nil {
			c.mu.Lock()
			leaving := c.leaving
			c.mu.Unlock()
			if leaving {
				c.failAll(&AbortError{Node: -1, Code: 0, Reason: "left the job"}, false)
			} else {
				c.failAll(&AbortError{Node: -1, Code: -1, Reason: fmt.Sprintf("lost the coordinator connection: %v", err)}, true)
			}
			return
		}
		switch m.Kind {
		case msgTable:
			c.mu.Lock()
			if c.table == nil {
				c.table = m.Table
				c.tableCh <- nil
			}
			c.mu.Unlock()
		case msgRelease:
			c.mu.Lock()
			ch := c.barriers[m.Name]
			delete(c.barriers, m.Name)
			c.mu.Unlock()
			if ch != nil {
				ch <- nil
			}
		case msgAbort:
			c.failAll(&AbortError{Node: m.Node, Code: m.Code, Reason: m.Reason}, true)
		case msgError:
			c.failAll(&AbortError{Node: -1, Code: -1, Reason: m.Reason}, true)
			c.conn.Close()
			return
		default:
			c.failAll(&AbortError{Node: -1, Code: -1, Reason: fmt.Sprintf("unexpected message kind %d from the coordinator", m.Kind)}, true)
			c.conn.Close()
			return
		}
	}
}

// failAll records the first abort, fails every waiter and tells OnAbort.
func (c *Client) failAll(e *AbortError, notify bool) {
	c.mu.Lock()
	first := c.aborted == nil
	if first {
		c.aborted = e
	}
	e = c.aborted
	bs := c.barriers
	c.barriers = map[string]chan error{}
	f := c.onAbort
	if c.table == nil {
		select {
		case c.tableCh <- e:
		default:
		}
	}
	c.mu.Unlock()
	for _, ch := range bs {
		ch <- e
	}
	if first && notify && f != nil {
		f(e.Node, e.Code, e.Reason)
	}
}

// OnAbort sets the function told (once, from the client's reader goroutine) that the job is aborted: node is the
// node that aborted or was lost (-1: the coordinator), code its code (-1 for a lost node), reason the message. If an
// abort arrived already, f is called at once.
func (c *Client) OnAbort(f func(node, code int, reason string)) {
	c.mu.Lock()
	c.onAbort = f
	e := c.aborted
	c.mu.Unlock()
	if e != nil && f != nil && e.Reason != "left the job" {
		f(e.Node, e.Code, e.Reason)
	}
}

// Barrier returns once every node entered the barrier name, or with an *AbortError, or after timeout.
func (c *Client) Barrier(name string, timeout time.Duration) error {
	if name == "" || len(name) > maxName {
		return fmt.Errorf("bootstrap: barrier name of %d bytes", len(name))
	}
	ch := make(chan error, 1)
	c.mu.Lock()
	if c.aborted != nil {
		e := c.aborted
		c.mu.Unlock()
		return e
	}
	if _, busy := c.barriers[name]; busy {
		c.mu.Unlock()
		return fmt.Errorf("bootstrap: barrier %q entered twice at once", name)
	}
	c.barriers[name] = ch
	c.mu.Unlock()
	if err := c.send(&message{Kind: msgBarrier, Name: name}); err != nil {
		return fmt.Errorf("bootstrap: node %d: barrier %q: %w", c.cfg.Node, name, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-ch:
		return err
	case <-t.C:
		c.mu.Lock()
		delete(c.barriers, name)
		c.mu.Unlock()
		return fmt.Errorf("bootstrap: node %d: barrier %q timed out after %v", c.cfg.Node, name, timeout)
	}
}

// Abort tells every other node (through the coordinator) that this node aborts the job.
func (c *Client) Abort(code int, reason string) error {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	return c.send(&message{Kind: msgAbort, Node: c.cfg.Node, Code: code, Reason: reason})
}

// Leave ends the node's part of the job cleanly (the coordinator does not report it lost) and closes the
// connection. It is idempotent.
func (c *Client) Leave() error {
	c.mu.Lock()
	already := c.leaving
	c.leaving = true
	c.mu.Unlock()
	if already {
		<-c.done
		return nil
	}
	err := c.send(&message{Kind: msgLeave})
	// The coordinator closes its end after the Leave; wait for that so nothing is cut short.
	t := time.NewTimer(writeTimeout)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	}
	c.conn.Close()
	<-c.done
	return err
}
