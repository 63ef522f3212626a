package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gompj/gompj/internal/env"
	"github.com/gompj/gompj/internal/proc"
	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/node/bootstrap"
)

// launch is one job started by the launcher: np ranks on one node (this process's child), on nodes local node
// processes, or on node processes started over ssh on hosts.
type launch struct {
	np, nodes, rpn int
	dev            string   // the device between hosts, for every node process (GOMPJ_DEV)
	hosts          []string // ssh targets, one node process each; empty: local processes
	prefix         string   // "", "ranks" or "node": what each forwarded output line starts with
	ssh            []string // the ssh command (default "ssh")
	iface          string   // the coordinator's listen host (default: loopback, or the interface routing to hosts[0])
	timeout        time.Duration
	program        string
	args           []string
	stdout, stderr io.Writer
}

// child is one node process.
type child struct {
	node int
	cmd  *exec.Cmd
	done chan struct{}
	code int
	fwd  sync.WaitGroup // its output forwarders
	// signaled: the launcher signalled it (killAll), so a signal that ended it is no news
	signaled bool
}

// runOne runs the program as a one-node job: one process, N goroutine ranks, output passed through.
func (l *launch) runOne() int {
	cmd := exec.Command(l.program, l.args...)
	cmd.Env = env.Job{Ranks: l.np, Nodes: 1}.Environ(os.Environ())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, l.stdout, l.stderr
	proc.Group(cmd)
	// Caught before the child starts: a signal in between would end the launcher alone, the child running on.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT) // passed on: SIGQUIT prints the ranks' stacks
	defer signal.Stop(sig)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(l.stderr, "gompj run: %v\n", err)
		return 1
	}
	done := make(chan struct{})
	var forwarded atomic.Bool
	go func() {
		for {
			select {
			case s := <-sig:
				forwarded.Store(true)
				proc.Signal(cmd, s)
			case <-done:
				return
			}
		}
	}()
	cmd.Wait()
	close(done)
	if proc.Signaled(cmd) && !forwarded.Load() { // killed, out of memory: say so, as for a node of a larger job
		fmt.Fprintf(l.stderr, "gompj run: the job's process (%d ranks) %s\n", l.np, proc.Describe(cmd))
	}
	return proc.ExitStatus(cmd)
}

// coordinatorHost picks where the launcher's coordinator listens: -iface, loopback for local node processes,
// else the local address of the interface that routes to the first host.
func (l *launch) coordinatorHost() (string, error) {
	if l.iface != "" {
		return l.iface, nil
	}
	if len(l.hosts) == 0 {
		return "127.0.0.1", nil
	}
	h := sshHostName(l.hosts[0])
	c, err := net.Dial("udp", net.JoinHostPort(h, "22"))
	if err != nil {
		return "", fmt.Errorf("no route to %s to choose the coordinator's interface (use -iface): %w", h, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

// sshHostName strips user@ from an ssh target.
func sshHostName(target string) string {
	if _, h, ok := strings.Cut(target, "@"); ok {
		return h
	}
	return target
}

// runMulti runs a multi-node job. The launcher itself runs the coordinator (not node 0): it outlives every node,
// so it can report a node that died and stop the job even if node 0 is the one that died.
func (l *launch) runMulti() int {
	layout, err := node.NewLayout(l.np, l.nodes, l.rpn)
	if err != nil {
		fmt.Fprintf(l.stderr, "gompj run: %v\n", err)
		return 2
	}
	if l.dev != "" {
		// GOMPJ_DEV is a tuning variable: every node process, local or over ssh, gets the launcher's own.
		os.Setenv(env.Dev.Name, l.dev)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		fmt.Fprintf(l.stderr, "gompj run: job secret: %v\n", err)
		return 1
	}
	secret := hex.EncodeToString(raw)
	host, err := l.coordinatorHost()
	if err != nil {
		fmt.Fprintf(l.stderr, "gompj run: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		fmt.Fprintf(l.stderr, "gompj run: coordinator: %v\n", err)
		return 1
	}
	co, err := bootstrap.NewCoordinator(bootstrap.CoordinatorConfig{Listener: ln, Nodes: l.nodes, Secret: []byte(secret),
		Timeout: l.timeout})
	if err != nil {
		ln.Close()
		fmt.Fprintf(l.stderr, "gompj run: %v\n", err)
		return 1
	}
	defer co.Close()

	// Signals are caught before any node process starts: one in between would end the launcher alone.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sig)

	var outMu sync.Mutex // whole lines from different nodes never interleave
	children := make([]*child, l.nodes)
	for i := range l.nodes {
		job := env.Job{Ranks: l.np, Nodes: l.nodes, Node: i, RanksPerNode: l.rpn, Coordinator: co.Addr(),
			Timeout: l.timeout}
		var cmd *exec.Cmd
		if len(l.hosts) == 0 {
			job.Secret = secret
			cmd = exec.Command(l.program, l.args...)
			cmd.Env = job.Environ(os.Environ())
		} else {
			job.SecretStdin = true
			cmd = l.sshCommand(l.hosts[i], job)
			cmd.Stdin = strings.NewReader(secret + "\n") // never on a command line: ps shows those to everyone
		}
		proc.Group(cmd)
		tag := ""
		switch l.prefix {
		case "ranks":
			lo, hi := layout.Range(i)
			tag = fmt.Sprintf("[%d-%d] ", lo, hi-1)
			if hi-lo == 1 {
				tag = fmt.Sprintf("[%d] ", lo)
			}
		case "node":
			tag = fmt.Sprintf("[node %d] ", i)
		}
		so, err1 := cmd.StdoutPipe()
		se, err2 := cmd.StderrPipe()
		if err := errors.Join(err1, err2); err != nil {
			fmt.Fprintf(l.stderr, "gompj run: %v\n", err)
			return 1
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(l.stderr, "gompj run: node %d: %v\n", i, err)
			l.killAll(children[:i], syscall.SIGKILL)
			return 1
		}
		c := &child{node: i, cmd: cmd, done: make(chan struct{})}
		c.fwd.Add(2)
		go forward(so, l.stdout, tag, &outMu, &c.fwd)
		go forward(se, l.stderr, tag, &outMu, &c.fwd)
		children[i] = c
	}

	exited := make(chan *child, l.nodes)
	for _, c := range children {
		go func() {
			c.fwd.Wait() // the pipes must be drained before Wait closes them
			c.cmd.Wait()
			c.code = proc.ExitStatus(c.cmd)
			close(c.done)
			exited <- c
		}()
	}
	worst, left := 0, l.nodes
	var killTimer <-chan time.Time
	var interrupted os.Signal
	for left > 0 {
		select {
		case c := <-exited:
			left--
			if c.code > worst {
				worst = c.code
			}
			// Say which node failed first, and how, and every node process that a signal ended (killed, out of
			// memory) unless the launcher sent it: otherwise only the exit status would tell, as the survivors'
			// reports of a lost node go to a program that may not print them.
			if c.code != 0 && interrupted == nil && !c.signaled && (killTimer == nil || proc.Signaled(c.cmd)) {
				fmt.Fprintf(l.stderr, "gompj run: node %d (%s) %s\n", c.node, l.where(layout, c.node), proc.Describe(c.cmd))
			}
			if c.code != 0 && killTimer == nil {
				// The runtime aborts the other nodes within seconds; stop whatever is still running after that.
				killTimer = time.After(5 * time.Second)
			}
		case s := <-sig:
			if s == syscall.SIGQUIT {
				// Ctrl-\: every node process prints the stacks of its goroutines, its ranks' among them, and
				// exits, as Go's runtime does on SIGQUIT: where a job that hangs is stuck. The launcher's own stacks
				// would tell nothing, and the node processes lead process groups of their own, which the
				// terminal's signal does not reach. (Over ssh, the signal ends the ssh client only: the remote
				// node processes lose the coordinator and abort.)
				fmt.Fprintf(l.stderr, "gompj run: %v: the node processes print their goroutines' stacks\n", s)
				l.killAll(children, syscall.SIGQUIT)
				if killTimer == nil {
					killTimer = time.After(5 * time.Second)
				}
				continue
			}
			if interrupted == nil {
				interrupted = s
				fmt.Fprintf(l.stderr, "gompj run: %v: stopping the job\n", s)
				co.Close() // every node loses the coordinator and aborts, also over ssh
				l.killAll(children, syscall.SIGTERM)
				killTimer = time.After(2 * time.Second)
			} else {
				l.killAll(children, syscall.SIGKILL)
			}
		case <-killTimer:
			l.killAll(children, syscall.SIGKILL)
			killTimer = nil
		}
	}
	if interrupted != nil {
		return 128 + int(interrupted.(syscall.Signal))
	}
	if err := waitCoordinator(co); err != nil && worst == 0 {
		fmt.Fprintf(l.stderr, "gompj run: %v\n", err)
		worst = 1
	}
	return worst
}

func waitCoordinator(co *bootstrap.Coordinator) error {
	ch := make(chan error, 1)
	go func() { ch <- co.Wait() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(2 * time.Second):
		return nil
	}
}

// where names node i's ranks, and its host when it runs over ssh.
func (l *launch) where(layout node.Layout, i int) string {
	lo, hi := layout.Range(i)
	s := fmt.Sprintf("ranks %d-%d", lo, hi-1)
	if hi-lo == 1 {
		s = fmt.Sprintf("rank %d", lo)
	}
	if i < len(l.hosts) {
		s += " on " + l.hosts[i]
	}
	return s
}

// killAll signals the process group of every node process still running.
func (l *launch) killAll(cs []*child, s syscall.Signal) {
	for _, c := range cs {
		if c == nil {
			continue
		}
		select {
		case <-c.done:
		default:
			c.signaled = true
			proc.Signal(c.cmd, s)
		}
	}
}

// sshCommand starts a node process on target with the system OpenSSH client: `ssh -o BatchMode=yes target env
// VAR=... PROGRAM args`, the secret going over ssh's standard input (job.SecretStdin).
func (l *launch) sshCommand(target string, job env.Job) *exec.Cmd {
	argv := append([]string{}, l.ssh...)
	argv = append(argv, "-o", "BatchMode=yes", target, "env")
	// The remote login environment has none of the launcher's tuning variables: pass them on, then the identity.
	for _, kv := range append(env.Forwarded(os.Environ()), job.Env()...) {
		argv = append(argv, shellQuote(kv))
	}
	argv = append(argv, shellQuote(l.program))
	for _, a := range l.args {
		argv = append(argv, shellQuote(a))
	}
	return exec.Command(argv[0], argv[1:]...)
}

// shellQuote quotes s for the remote shell that sshd runs the command with.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@+%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// forward copies r to w line by line, each line starting with tag.
func forward(r io.Reader, w io.Writer, tag string, mu *sync.Mutex, wg *sync.WaitGroup) {
	defer wg.Done()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			if !strings.HasSuffix(line, "\n") {
				line += "\n"
			}
			mu.Lock()
			io.WriteString(w, tag+line)
			mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}
