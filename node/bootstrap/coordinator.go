package bootstrap

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/gompj/gompj/netdev/auth"
)

// Defaults for zero Config values.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultHandshakeTimeout = 5 * time.Second
	writeTimeout            = 5 * time.Second
)

// CoordinatorConfig configures a coordinator.
type CoordinatorConfig struct {
	Addr     string       // listen address (ignored if Listener is set)
	Listener net.Listener // an already-bound listener, optional
	Nodes    int          // how many nodes must register
	Secret   []byte       // the job secret
	// Timeout is how long the nodes have to register, from NewCoordinator (default 30 s).
	Timeout          time.Duration
	HandshakeTimeout time.Duration // per connection (default 5 s)
}

// Coordinator is the rendezvous of a job's nodes. It serves in its own goroutines from NewCoordinator on.
type Coordinator struct {
	cfg  CoordinatorConfig
	ln   net.Listener
	wg   sync.WaitGroup
	done chan struct{}

	mu       sync.Mutex
	nodes    []*member // by node id; nil until registered
	tableOut bool
	barriers map[string]map[int]bool
	left     int
	gone     int
	jobErr   error
	finished bool
	timer    *time.Timer
	pending  map[net.Conn]struct{} // in handshake or registration
	closed   bool
	rejected int
}

type member struct {
	id   int
	self Endpoint
	conn net.Conn
	wmu  sync.Mutex
	left bool
	gone bool
}

// NewCoordinator listens and starts serving registrations.
func NewCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	if cfg.Nodes <= 0 || cfg.Nodes > 1<<20 {
		return nil, fmt.Errorf("bootstrap: %d nodes", cfg.Nodes)
	}
	if len(cfg.Secret) < auth.MinSecret {
		return nil, fmt.Errorf("bootstrap: job secret of %d bytes is too short (at least %d)", len(cfg.Secret), auth.MinSecret)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	c := &Coordinator{cfg: cfg, ln: cfg.Listener, done: make(chan struct{}), nodes: make([]*member, cfg.Nodes),
		barriers: map[string]map[int]bool{}, pending: map[net.Conn]struct{}{}}
	if c.ln == nil {
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: coordinator: %w", err)
		}
		c.ln = ln
	}
	c.timer = time.AfterFunc(cfg.Timeout, c.registrationTimeout)
	c.wg.Add(1)
	go c.acceptLoop()
	return c, nil
}

// Addr is where the coordinator listens.
func (c *Coordinator) Addr() string { return c.ln.Addr().String() }

// Wait blocks until the job is over for the coordinator: nil once every node left cleanly; otherwise the first
// failure (registration timeout naming the missing nodes, a lost node, an abort).
func (c *Coordinator) Wait() error {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jobErr
}

// Close stops the coordinator and drops every connection.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.timer.Stop()
		for nc := range c.pending {
			nc.Close()
		}
		for _, m := range c.nodes {
			if m != nil {
				m.conn.Close()
			}
		}
		c.finishLocked(nil)
	}
	c.mu.Unlock()
	c.ln.Close()
	c.wg.Wait()
	return nil
}

func (c *Coordinator) finishLocked(err error) {
	if c.jobErr == nil {
		c.jobErr = err
	}
	if !c.finished {
		c.finished = true
		close(c.done)
	}
}

func (c *Coordinator) acceptLoop() {
	defer c.wg.Done()
	for {
		nc, err := c.ln.Accept()
		if err != nil {
			c.mu.Lock()
			closed := c.closed
			c.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			nc.Close()
			return
		}
		c.pending[nc] = struct{}{}
		c.wg.Add(1)
		c.mu.Unlock()
		go c.serve(nc)
	}
}

// serve authenticates one connection, takes its registration and then reads the node's messages until it goes.
func (c *Coordinator) serve(nc net.Conn) {
	defer c.wg.Done()
	m, err := c.admit(nc)
	c.mu.Lock()
	delete(c.pending, nc)
	if err != nil {
		c.rejected++
	}
	c.mu.Unlock()
	if err != nil {
		nc.Close()
		return
	}
	for {
		msg, err := readMessage(nc, c.cfg.Nodes)
		if err != nil {
			c.lost(m, err)
			return
		}
		switch msg.Kind {
		case msgBarrier:
			c.barrier(m, msg.Name)
		case msgAbort:
			c.abort(m, msg.Code, msg.Reason)
		case msgLeave:
			c.leave(m)
			return
		default:
			c.lost(m, fmt.Errorf("unexpected message kind %d", msg.Kind))
			return
		}
	}
}

func (c *Coordinator) admit(nc net.Conn) (*member, error) {
	h, err := auth.Accept(nc, c.cfg.Secret, Purpose, c.cfg.HandshakeTimeout)
	if err != nil {
		return nil, err
	}
	nc.SetReadDeadline(time.Now().Add(c.cfg.HandshakeTimeout))
	msg, err := readMessage(nc, c.cfg.Nodes)
	if err != nil {
		return nil, err
	}
	nc.SetReadDeadline(time.Time{})
	if msg.Kind != msgRegister || int(h.From) != msg.Node {
		return nil, fmt.Errorf("bootstrap: %s: expected the registration of node %d", nc.RemoteAddr(), h.From)
	}
	m := &member{id: msg.Node, self: *msg.Self, conn: nc}
	c.mu.Lock()
	defer c.mu.Unlock()
	var reason string
	switch {
	case c.finished:
		reason = "the job is over"
		if c.jobErr != nil {
			reason = c.jobErr.Error()
		}
	case c.nodes[m.id] != nil:
		reason = fmt.Sprintf("node %d registered twice (first from %s)", m.id, c.nodes[m.id].conn.RemoteAddr())
	}
	if reason != "" {
		m.send(&message{Kind: msgError, Reason: "bootstrap: " + reason})
		return nil, errors.New(reason)
	}
	c.nodes[m.id] = m
	for _, o := range c.nodes {
		if o == nil {
			return m, nil
		}
	}
	c.timer.Stop()
	c.tableOut = true
	table := make([]Endpoint, len(c.nodes))
	for i, o := range c.nodes {
		table[i] = o.self
	}
	for _, o := range c.nodes {
		o.send(&message{Kind: msgTable, Table: table})
	}
	return m, nil
}

func (m *member) send(msg *message) error {
	b, err := encodeMessage(msg)
	if err != nil {
		return err
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err = m.conn.Write(b)
	return err
}

func (c *Coordinator) registrationTimeout() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tableOut || c.finished {
		return
	}
	var missing []int
	for i, m := range c.nodes {
		if m == nil {
			missing = append(missing, i)
		}
	}
	err := fmt.Errorf("bootstrap: node(s) %v never registered within %v", missing, c.cfg.Timeout)
	for _, m := range c.nodes {
		if m != nil {
			m.send(&message{Kind: msgError, Reason: err.Error()})
			m.conn.Close()
		}
	}
	c.finishLocked(err)
}

func (c *Coordinator) barrier(m *member, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.tableOut {
		c.failLocked(fmt.Errorf("bootstrap: node %d entered barrier %q before the table was out", m.id, name))
		return
	}
	set := c.barriers[name]
	if set == nil {
		set = map[int]bool{}
		c.barriers[name] = set
	}
	set[m.id] = true
	if len(set) < len(c.nodes) {
		return
	}
	delete(c.barriers, name)
	for _, o := range c.nodes {
		if !o.gone {
			o.send(&message{Kind: msgRelease, Name: name})
		}
	}
}

func (c *Coordinator) abort(m *member, code int, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jobErr == nil {
		c.jobErr = &AbortError{Node: m.id, Code: code, Reason: reason}
	}
	c.broadcastLocked(m.id, &message{Kind: msgAbort, Node: m.id, Code: code, Reason: reason})
}

func (c *Coordinator) broadcastLocked(except int, msg *message) {
	for _, o := range c.nodes {
		if o != nil && o.id != except && !o.gone {
			o.send(msg)
		}
	}
}

func (c *Coordinator) failLocked(err error) {
	c.broadcastLocked(-1, &message{Kind: msgError, Reason: err.Error()})
	c.finishLocked(err)
}

func (c *Coordinator) leave(m *member) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m.left, m.gone = true, true
	c.left++
	c.gone++
	m.conn.Close()
	c.checkDoneLocked()
}

// lost: the node's connection ended without a Leave. Everyone else is told that the node is gone.
func (c *Coordinator) lost(m *member, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.gone {
		return
	}
	m.gone = true
	c.gone++
	m.conn.Close()
	if c.closed || c.finished {
		return
	}
	reason := fmt.Sprintf("node %d lost its coordinator connection (process died?): %v", m.id, err)
	if c.jobErr == nil {
		c.jobErr = &AbortError{Node: m.id, Code: -1, Reason: reason}
	}
	c.broadcastLocked(m.id, &message{Kind: msgAbort, Node: m.id, Code: -1, Reason: reason})
	if !c.tableOut {
		// Without the lost node the job cannot start: the bootstrap fails.
		c.timer.Stop()
		c.finishLocked(nil)
		return
	}
	c.checkDoneLocked()
}

func (c *Coordinator) checkDoneLocked() {
	if !c.tableOut {
		return
	}
	if c.gone == len(c.nodes) {
		c.finishLocked(nil)
	}
}

// Rejected counts connections that failed the handshake or the registration (for tests and diagnostics).
func (c *Coordinator) Rejected() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rejected
}

// registered lists the registered node ids (tests).
func (c *Coordinator) registered() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []int
	for i, m := range c.nodes {
		if m != nil {
			ids = append(ids, i)
		}
	}
	return slices.Clip(ids)
}
