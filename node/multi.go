package node

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/internal/env"
	"github.com/gompj/gompj/netdev/auth"
	"github.com/gompj/gompj/node/bootstrap"
	"github.com/gompj/gompj/ranks"
)

// Grace periods of an aborted multi-node job: how long the local ranks get to notice the abort (a rank busy in
// computation never does), how long the device and the coordinator get to close, and how long a node that lost
// a peer waits for the coordinator's word (see peerLost). Together they keep the time from an abort to Run's
// return well under 5 s.
const (
	abortGrace    = 2 * time.Second
	teardownGrace = time.Second
	lostGrace     = 200 * time.Millisecond
	forever       = 100 * 365 * 24 * time.Hour
)

// job is one node's share of a multi-node job.
type job struct {
	cfg    Config
	layout Layout
	w      *ranks.World
	cl     *bootstrap.Client
	// early holds an abort the coordinator reported before the World existed.
	early atomic.Pointer[RemoteError]
}

func (j *job) describeRanks(node int) string {
	if node < 0 || node >= j.layout.Nodes {
		return "no ranks"
	}
	lo, hi := j.layout.Range(node)
	if hi-lo == 1 {
		return fmt.Sprintf("rank %d", lo)
	}
	return fmt.Sprintf("ranks %d-%d", lo, hi-1)
}

// peerLost is a device's report, through the World's PeerLost, of a node it can no longer reach. Devices deliver
// nothing before Start, which runs once the World exists.
//
// The job aborts for the lost peer only if the coordinator has not said why within lostGrace. A node that aborts
// the job leaves the coordinator, which then tells every node its cause, before it closes its connections; but
// on this node that notice and the device's sight of the closed connections still race (a rank polling the device
// sees the close at once, while the goroutine reading the coordinator's connection may wait for a processor: with
// one per node process, procShare, the close won in about 1 run of 10 of TestAbortDuringALargeTransfer, and the
// job ended with "connection closed" and exit code 1 instead of the aborting rank's cause and code). A node
// process that died is reported by the coordinator too, as lost.
func (j *job) peerLost(node int, err error) {
	e := &RemoteError{Node: node, Ranks: j.describeRanks(node), Lost: true, Code: -1, Reason: err.Error()}
	go func() {
		t := time.NewTimer(lostGrace)
		defer t.Stop()
		select {
		case <-j.w.AbortCh():
		case <-t.C:
			j.w.Abort(e)
		}
	}()
}

// remoteAbort is the coordinator's notice that another node aborted the job or was lost.
func (j *job) remoteAbort(node, code int, reason string) {
	e := &RemoteError{Node: node, Ranks: j.describeRanks(node), Code: code, Reason: reason, fromCoordinator: true}
	if node >= 0 && code == -1 {
		e.Lost = true
	}
	if node < 0 {
		e.Ranks = ""
	}
	if j.w == nil {
		j.early.CompareAndSwap(nil, e)
		return
	}
	j.w.Abort(e)
}

// forwardAborts tells the other nodes (through the coordinator) about a local abort, as soon as it happens: a
// failed rank, Abort(code), a lost peer seen only by this node's device.
func (j *job) forwardAborts(stop <-chan struct{}) {
	select {
	case <-stop:
		return
	case <-j.w.AbortCh():
	}
	cause := j.w.AbortCause()
	var re *RemoteError
	if errors.As(cause, &re) && re.fromCoordinator {
		return
	}
	j.cl.Abort(abortCode(cause), cause.Error()) // the coordinator's notice names this node
}

// runMulti runs this node's ranks of a multi-node job: the devices opened, the bootstrap through the coordinator
// (which publishes each node's host and device addresses), a route for every peer node, the devices started with
// the World as their sink, a barrier, the ranks, and a finalize that delivers every message in flight before the
// devices close.
func runMulti(cfg Config, body Body) error {
	layout, err := NewLayout(cfg.Ranks, cfg.Nodes, cfg.RanksPerNode)
	if err != nil {
		return err
	}
	me := layout.Describe(cfg.NodeID)
	if cfg.Coordinator == "" {
		return fmt.Errorf("gompj: %s of %d: no coordinator address (GOMPJ_COORDINATOR)", me, cfg.Nodes)
	}
	if stdin, err := env.SecretStdin.On(os.LookupEnv); err != nil {
		return err
	} else if stdin && cfg.Secret == nil {
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil && line == "" {
			return fmt.Errorf("gompj: %s: reading the job secret from standard input: %w", me, err)
		}
		cfg.Secret = []byte(strings.TrimRight(line, "\r\n"))
	}
	if len(cfg.Secret) < auth.MinSecret {
		return fmt.Errorf("gompj: %s: a multi-node job needs a job secret of at least %d bytes (GOMPJ_SECRET), got %d",
			me, auth.MinSecret, len(cfg.Secret))
	}
	trs, err := openDevices(&openSpec{cfg: cfg, layout: layout})
	if err != nil {
		return fmt.Errorf("gompj: %s: %w", me, err)
	}
	defer func() { closeAll(trs, nil) }() // those not handed to the World's device: the job failed before
	self := bootstrap.Endpoint{Host: hostIdentity(), Addrs: map[string][]byte{}}
	for name, tr := range trs {
		self.Addrs[name] = tr.Address()
	}

	var co *bootstrap.Coordinator
	if cfg.ServeCoordinator && cfg.NodeID == 0 {
		co, err = bootstrap.NewCoordinator(bootstrap.CoordinatorConfig{Addr: cfg.Coordinator, Nodes: cfg.Nodes,
			Secret: cfg.Secret, Timeout: cfg.Timeout})
		if err != nil {
			return fmt.Errorf("gompj: %s: starting the coordinator on %s: %w", me, cfg.Coordinator, err)
		}
		defer co.Close()
	}
	cl, err := bootstrap.Join(bootstrap.ClientConfig{Coordinator: cfg.Coordinator, Node: cfg.NodeID, Nodes: cfg.Nodes,
		Self: self, Secret: cfg.Secret, Timeout: cfg.Timeout + 5*time.Second})
	if err != nil {
		return fmt.Errorf("gompj: %s: bootstrap: %w", me, err)
	}
	j := &job{cfg: cfg, layout: layout, cl: cl}
	cl.OnAbort(j.remoteAbort)
	fail := func(err error) error {
		cl.Abort(1, fmt.Sprintf("%s: %v", me, err))
		cl.Leave()
		return fmt.Errorf("gompj: %s: %w", me, err)
	}

	table := cl.Table()
	rt, err := plan(cfg.NodeID, table, cfg.Dev, !cfg.NoHostSHM, layout)
	if err != nil {
		return fail(err)
	}
	used := rt.used()
	closeAll(trs, func(name string) bool { return slices.Contains(used, name) })
	byNode := make([]device.Device, cfg.Nodes)
	for n, name := range rt.names {
		if name != "" {
			byNode[n] = trs[name]
		}
	}
	var dev device.Device
	if len(used) == 1 {
		dev = trs[used[0]]
	} else {
		order := make([]device.Device, len(used))
		for i, name := range used {
			order[i] = trs[name]
		}
		if dev, err = device.NewRouter(layout.NodeOf, byNode, order); err != nil {
			return fail(err)
		}
	}
	routes := rt.describe(trs)
	started := trs
	trs = nil // dev owns them from here on: every path below closes dev

	lo, hi := layout.Range(cfg.NodeID)
	// Whether ranks may spin depends on every rank on this host, not only this node's: several node processes
	// on one box (gompj run -nodes, or two Slurm tasks per host) share its cores.
	pol := policy(cfg, hi-lo, rt.sameHost(), rt.sameHostNodes())
	if bp := busyPoll(cfg, rt.sameHost()); bp != 0 {
		for _, name := range used {
			if d, ok := started[name].(busyPoller); ok {
				d.SetBusyPoll(bp)
			}
		}
	}
	// After the policy, which compares the host's ranks with all its cores; before the worker pool, sized by
	// GOMAXPROCS.
	routes += shareCores(hi-lo, rt.sameHost())
	routes += bindShare(cfg.Bind, rt.sameHostIndex(), rt.sameHostNodes())
	line, restore := progressCore(cfg.Overlap)
	defer restore()
	routes += line
	var w *ranks.World
	pool, exec, err := executor(cfg, func(err error) { w.Abort(err) })
	if err != nil {
		dev.Close()
		return fail(err)
	}
	defer pool.close()
	if pool != nil {
		for _, name := range used {
			if d, ok := started[name].(helped); ok {
				d.SetHelper(pool)
			}
		}
	}
	w, err = ranks.NewWorld(ranks.Options{Size: cfg.Ranks, Lo: lo, Hi: hi, EagerLimit: cfg.EagerLimit,
		Policy: pol, NetSpin: netSpin(cfg, pol), Device: dev, NodeOf: layout.NodeOf, Routes: routes, Devices: used,
		UnexpectedLimit: cfg.UnexpectedLimit, UnexpectedShare: cfg.UnexpectedShare, Executor: exec, NbcSlots: cfg.NbcSlots,
		Overlap: cfg.Overlap, CallCheck: cfg.CallCheck > 0})
	if err != nil {
		dev.Close()
		return fail(err)
	}
	// The World is every device's sink: a lost peer reaches it through PeerLost, which the hook makes this job's.
	w.SetHooks(ranks.Hooks{PeerLost: j.peerLost})
	j.w = w
	if e := j.early.Load(); e != nil {
		w.Abort(e)
	}
	stop := make(chan struct{})
	defer close(stop)
	go j.forwardAborts(stop)
	for _, name := range used {
		if err := started[name].Start(w, rt.addrs(name, table)); err != nil {
			w.Abort(fmt.Errorf("%s: %s device: %w", me, name, err))
			return j.teardown(dev, co)
		}
	}

	// Start: every device reaches its peers and every node is here.
	for _, name := range used {
		if err := started[name].WaitConnected(cfg.Timeout); err != nil {
			w.Abort(fmt.Errorf("%s: connecting: %w", me, err))
			return j.teardown(dev, co)
		}
	}
	if err := cl.Barrier("start", cfg.Timeout); err != nil {
		w.Abort(j.barrierErr(err, "start"))
		return j.teardown(dev, co)
	}

	if cfg.CallCheck > 0 {
		go checkCalls(w, cfg.CallCheck, stop)
	}
	runErr := runRanksGrace(w, cfg, body)
	if runErr != nil || w.Aborted() {
		return j.teardown(dev, co)
	}
	// Finalize: once every node's ranks have returned, no receive waits for anything; Close flushes what is still
	// queued (sends whose receives were already satisfied by copies), says goodbye and closes.
	if err := cl.Barrier("finalize", forever); err != nil {
		w.Abort(j.barrierErr(err, "finalize"))
		return j.teardown(dev, co)
	}
	closeErr := dev.Close()
	cl.Leave()
	if co != nil {
		waitTimeout(func() { co.Wait() }, cfg.Timeout)
	}
	if closeErr != nil {
		return fmt.Errorf("gompj: %s: closing the devices: %w", me, closeErr)
	}
	return nil
}

// barrierErr turns a failed coordinator barrier into the job's cause.
func (j *job) barrierErr(err error, name string) error {
	var ae *bootstrap.AbortError
	if errors.As(err, &ae) {
		e := &RemoteError{Node: ae.Node, Ranks: j.describeRanks(ae.Node), Code: ae.Code, Reason: ae.Reason, fromCoordinator: true}
		e.Lost = ae.Node >= 0 && ae.Code == -1
		return e
	}
	return fmt.Errorf("%s: %s barrier: %w", j.layout.Describe(j.cfg.NodeID), name, err)
}

// teardown ends an aborted job quickly: the abort has been forwarded; the device and the coordinator connection
// get a short grace to close.
func (j *job) teardown(dev device.Device, co *bootstrap.Coordinator) error {
	cause := j.w.AbortCause()
	// Make sure the other nodes heard of a local cause before this process goes away.
	var re *RemoteError
	if !errors.As(cause, &re) || !re.fromCoordinator {
		j.cl.Abort(abortCode(cause), cause.Error())
	}
	// Leave before closing the device: the coordinator handles this node's messages in order, so once it has
	// closed the connection after the Leave it has also broadcast the abort, and the other nodes hear the cause
	// before they see this node's connections close.
	waitTimeout(func() { j.cl.Leave() }, teardownGrace)
	waitTimeout(func() { dev.Close() }, teardownGrace)
	if co != nil {
		// Node 0 serves the coordinator: give the others a moment to hear the abort and go.
		waitTimeout(func() { co.Wait() }, teardownGrace)
	}
	return cause
}

// runRanksGrace is runRanks for a multi-node job: once the job aborts, ranks that do not return within
// abortGrace (busy in computation, not in a gompj call) are left behind so that the process can exit.
func runRanksGrace(w *ranks.World, cfg Config, body Body) error {
	done := make(chan struct{})
	go func() {
		runRanks(w, cfg, body)
		close(done)
	}()
	select {
	case <-done:
		return w.AbortCause()
	case <-w.AbortCh():
	}
	t := time.NewTimer(abortGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	return w.AbortCause()
}

// waitTimeout runs f and waits for it at most d.
func waitTimeout(f func(), d time.Duration) {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// listenAddress picks this node's listen address: GOMPJ_LISTEN, else the local address of the interface that
// routes to the coordinator (loopback for a loopback coordinator), with a port the kernel chooses.
func listenAddress(cfg Config) (string, error) {
	if cfg.Listen != "" {
		if _, _, err := net.SplitHostPort(cfg.Listen); err == nil {
			return cfg.Listen, nil
		}
		return net.JoinHostPort(cfg.Listen, "0"), nil
	}
	// A UDP "connection" sends nothing; it asks the kernel which local address routes to the coordinator.
	c, err := net.Dial("udp", cfg.Coordinator)
	if err != nil {
		return "", fmt.Errorf("no route to the coordinator %s to choose a listen interface (set GOMPJ_LISTEN): %w", cfg.Coordinator, err)
	}
	defer c.Close()
	ip := c.LocalAddr().(*net.UDPAddr).IP
	return net.JoinHostPort(ip.String(), "0"), nil
}

// checkCalls runs the World's call check every interval until stop is closed or the job aborts.
func checkCalls(w *ranks.World, interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			w.CheckCalls()
		case <-stop:
			return
		case <-w.AbortCh():
			return
		}
	}
}
