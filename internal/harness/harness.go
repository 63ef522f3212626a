package harness

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/env"
	"github.com/gompj/gompj/internal/proc"
	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/node/bootstrap"
)

// marker starts the line a node process prints when it ends.
const marker = "gompj-harness: node "

// PureMax is the largest np the "pure" mode (one rank per node process) runs; larger jobs skip it to keep the
// suite fast.
const PureMax = 6

// pureMaxRace is PureMax under the race detector, where every process runs several times slower. A pure job of 3
// runs the same concurrent code (a rank, its device's loop and worker pool, peers in other processes) as one of 6;
// the larger ones run in the suite without the detector. (The root package's race run is test.sh's longest step:
// 346 s of 686 on the project's 2-vCPU box when this was set, pure mode 92 s of it; 223 s of 609 once node
// processes stopped sleeping a second at exit, raceEnv.)
const pureMaxRace = 3

// pureLimit is the largest np Run's pure mode runs in this binary.
func pureLimit() int {
	if raceEnabled {
		return pureMaxRace
	}
	return PureMax
}

// Run runs body in five subtests: "onenode" (np goroutine ranks), "nodes" (3 node processes, ranks in blocks;
// fewer if np < 3) and "pure" (np node processes of one rank; skipped for np > PureMax, or 3 under the race
// detector), both over TCP, "shm" (as "nodes", the node processes sharing memory) and "ofi" (as "nodes", over the
// rdma device on libfabric's tcp provider; skipped in builds without -tags ofi).
func Run(t *testing.T, np int, body func(c *gompj.Comm) error) {
	t.Helper()
	run(t, np, pureLimit(), body)
}

// RunLarge is Run with the pure mode whatever np: one process per rank for every rank, for the few tests that
// must see a large job of processes.
func RunLarge(t *testing.T, np int, body func(c *gompj.Comm) error) {
	t.Helper()
	run(t, np, np, body)
}

func run(t *testing.T, np, pureMax int, body func(c *gompj.Comm) error) {
	t.Helper()
	t.Run("onenode", func(t *testing.T) {
		if isChild() {
			t.Skip("node process of another subtest")
		}
		if err := gompj.RunWith(gompj.Config{Ranks: np, Nodes: 1}, body); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("nodes", func(t *testing.T) {
		Procs(t, Spec{Ranks: np, Nodes: min(3, np)}, body).Check(t)
	})
	t.Run("pure", func(t *testing.T) {
		if np > pureMax {
			t.Skipf("pure mode runs up to %d ranks (one process each); this test has %d", pureMax, np)
		}
		Procs(t, Spec{Ranks: np, Nodes: np}, body).Check(t)
	})
	t.Run("shm", func(t *testing.T) {
		Procs(t, Spec{Ranks: np, Nodes: min(3, np), HostSHM: true}, body).Check(t)
	})
	t.Run("ofi", func(t *testing.T) {
		SkipWithoutOFI(t)
		Procs(t, Spec{Ranks: np, Nodes: min(3, np), Env: OFIEnv()}, body).Check(t)
	})
}

// SkipWithoutOFI skips t in a build without the rdma device over libfabric (go test -tags ofi).
func SkipWithoutOFI(t *testing.T) {
	t.Helper()
	if err := node.CheckDevice(node.DevRDMA); err != nil {
		t.Skipf("%v (go test -tags ofi)", err)
	}
}

// OFIEnv makes node processes on this box talk as on different hosts, through the rdma device over libfabric:
// its tcp provider (tcp;ofi_rxm), or the one FI_PROVIDER names (FI_PROVIDER=shm go test -tags ofi ...). The
// "ofi" mode runs them so.
func OFIEnv() []string {
	prov := "tcp"
	if p := os.Getenv("FI_PROVIDER"); p != "" {
		prov = p
	}
	return []string{env.Dev.Name + "=" + node.DevRDMA, "FI_PROVIDER=" + prov}
}

// raceEnv is what a node process adds to its environment when this binary runs under the race detector (GORACE
// as the parent's, whose value is given): the detector's sleep at exit, which lets other goroutines finish a report
// and is 1 s by default, cut to 20 ms, unless GORACE sets it. Every job paid that second once its node processes
// ended, whatever the test did: TestCollectiveTable's nodes mode took 1.13 s under the detector, 0.13 s with the
// sleep cut (0.04 s without the detector); the root package's race run, about 150 jobs, spent more than half its
// time asleep. A race found by a node process still fails its job: the detector's exit status (66) is checked.
func raceEnv(gorace string) []string {
	if !raceEnabled || strings.Contains(gorace, "atexit_sleep_ms") {
		return nil
	}
	return []string{"GORACE=" + strings.TrimSpace(gorace+" atexit_sleep_ms=20")}
}

func isChild() bool { _, ok := env.HarnessJob.Get(os.LookupEnv); return ok }

// Spec describes a multi-process job.
type Spec struct {
	Ranks, Nodes int
	RanksPerNode int
	Timeout      time.Duration      // how long the parent waits for the whole job (default 90 s)
	Env          []string           // extra variables for every node process
	NodeEnv      func(int) []string // extra variables per node
	// Start, if set, starts node process i instead of exec.Command(os.Args[0], args...): tests wrap it, e.g. in
	// `ip netns exec`. It must return an unstarted command whose Env may be appended to.
	Start func(i int, args []string) *exec.Cmd
	// Skip lists nodes the parent does not start (bootstrap timeout tests).
	Skip []int
	// CoordinatorTimeout is the coordinator's registration timeout (default 20 s).
	CoordinatorTimeout time.Duration
	// CoordinatorAddr is where the coordinator listens (default 127.0.0.1:0).
	CoordinatorAddr string
	// HostSHM lets the node processes, all on this host, talk through shared memory (the shm device). Without it
	// they talk through the network device (GOMPJ_HOST_SHM=0), as they would on different hosts.
	HostSHM bool
}

// Job is a multi-process job started by Procs (in the parent).
type Job struct {
	Spec    Spec
	Layout  node.Layout
	cmds    []*exec.Cmd
	outs    []*lockedBuffer
	done    []chan struct{}
	results []Result
	co      *bootstrap.Coordinator
	started time.Time
	wg      sync.WaitGroup
}

// Result is how one node process ended.
type Result struct {
	Node   int
	Code   int // exit status; -1 if never started
	Output string
	End    time.Time
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runPattern is the -test.run pattern that selects exactly the test named name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// Procs starts the node processes of a job running body and returns at once (in the parent). In a node process
// of this very (sub)test it runs this node's ranks instead and ends the process: status 0 after success (the
// test returns), else the error on stderr and node.ExitCode(err).
func Procs(t *testing.T, s Spec, body func(c *gompj.Comm) error) *Job {
	t.Helper()
	if job, ok := env.HarnessJob.Get(os.LookupEnv); ok {
		if job != t.Name() {
			t.Skip("node process of another subtest")
		}
		me := env.HarnessNode.Text(os.LookupEnv)
		err := gompj.Run(body)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s%s failed: %v\n", marker, me, err)
			os.Exit(max(node.ExitCode(err), 1))
		}
		fmt.Printf("%s%s done\n", marker, me)
		t.SkipNow() // the parent judges the job; the node process just ends cleanly
	}
	if s.Timeout == 0 {
		s.Timeout = 90 * time.Second
	}
	if s.CoordinatorTimeout == 0 {
		s.CoordinatorTimeout = 20 * time.Second
	}
	if s.CoordinatorAddr == "" {
		s.CoordinatorAddr = "127.0.0.1:0"
	}
	layout, err := node.NewLayout(s.Ranks, s.Nodes, s.RanksPerNode)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 24)
	rand.Read(raw)
	secret := hex.EncodeToString(raw)
	co, err := bootstrap.NewCoordinator(bootstrap.CoordinatorConfig{Addr: s.CoordinatorAddr, Nodes: s.Nodes,
		Secret: []byte(secret), Timeout: s.CoordinatorTimeout})
	if err != nil {
		t.Fatal(err)
	}
	j := &Job{Spec: s, Layout: layout, co: co, started: time.Now(),
		cmds: make([]*exec.Cmd, s.Nodes), outs: make([]*lockedBuffer, s.Nodes), done: make([]chan struct{}, s.Nodes),
		results: make([]Result, s.Nodes)}
	t.Cleanup(func() { j.kill(syscall.SIGKILL); j.wg.Wait(); co.Close() })
	args := []string{"-test.run=" + runPattern(t.Name()), "-test.count=1", "-test.timeout=" + s.Timeout.String()}
	for i := range s.Nodes {
		j.done[i] = make(chan struct{})
		j.outs[i] = &lockedBuffer{}
		j.results[i] = Result{Node: i, Code: -1}
		skip := false
		for _, k := range s.Skip {
			skip = skip || k == i
		}
		if skip {
			close(j.done[i])
			continue
		}
		var cmd *exec.Cmd
		if s.Start != nil {
			cmd = s.Start(i, args)
		} else {
			cmd = exec.Command(os.Args[0], args...)
		}
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = env.Job{Ranks: s.Ranks, Nodes: s.Nodes, Node: i, RanksPerNode: s.RanksPerNode,
			Coordinator: co.Addr(), Secret: secret, Timeout: s.CoordinatorTimeout}.Environ(cmd.Env)
		cmd.Env = append(cmd.Env, env.HarnessJob.Name+"="+t.Name(), env.HarnessNode.Name+"="+strconv.Itoa(i))
		if !s.HostSHM {
			cmd.Env = append(cmd.Env, env.HostSHM.Name+"=0")
		}
		cmd.Env = append(cmd.Env, raceEnv(os.Getenv("GORACE"))...)
		cmd.Env = append(cmd.Env, s.Env...)
		if s.NodeEnv != nil {
			cmd.Env = append(cmd.Env, s.NodeEnv(i)...)
		}
		cmd.Stdout, cmd.Stderr = j.outs[i], j.outs[i]
		proc.Group(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting node %d: %v", i, err)
		}
		j.cmds[i] = cmd
		j.wg.Add(1)
		go func() {
			defer j.wg.Done()
			cmd.Wait()
			j.results[i] = Result{Node: i, Code: proc.ExitStatus(cmd), Output: j.outs[i].String(), End: time.Now()}
			close(j.done[i])
		}()
	}
	return j
}

// Kill sends sig to node i's process group.
func (j *Job) Kill(i int, sig syscall.Signal) {
	if c := j.cmds[i]; c != nil && c.Process != nil {
		proc.Signal(c, sig)
	}
}

func (j *Job) kill(sig syscall.Signal) {
	for i := range j.cmds {
		select {
		case <-j.done[i]:
		default:
			j.Kill(i, sig)
		}
	}
}

// Wait waits for every node process (killing them all after the spec's timeout) and returns how each ended.
func (j *Job) Wait(t *testing.T) []Result {
	t.Helper()
	all := make(chan struct{})
	go func() { j.wg.Wait(); close(all) }()
	timer := time.NewTimer(time.Until(j.started.Add(j.Spec.Timeout)))
	defer timer.Stop()
	select {
	case <-all:
	case <-timer.C:
		j.kill(syscall.SIGKILL)
		<-all
		t.Errorf("the job did not end within %v; node outputs:\n%s", j.Spec.Timeout, j.outputs())
	}
	return j.results
}

// WaitNode waits for node i alone.
func (j *Job) WaitNode(t *testing.T, i int, d time.Duration) Result {
	t.Helper()
	select {
	case <-j.done[i]:
	case <-time.After(d):
		t.Fatalf("node %d did not end within %v", i, d)
	}
	return j.results[i]
}

// Coordinator is the job's coordinator.
func (j *Job) Coordinator() *bootstrap.Coordinator { return j.co }

func (j *Job) outputs() string {
	var b strings.Builder
	for i, o := range j.outs {
		fmt.Fprintf(&b, "--- %s:\n%s", j.Layout.Describe(i), o.String())
	}
	return b.String()
}

// Check waits for the job and fails the test unless every node process ran the body and succeeded; the failure
// shows every node's output.
func (j *Job) Check(t *testing.T) {
	t.Helper()
	res := j.Wait(t)
	failed := false
	for _, r := range res {
		if r.Code != 0 {
			failed = true
			t.Errorf("%s exited with status %d", j.Layout.Describe(r.Node), r.Code)
		} else if !strings.Contains(r.Output, marker+strconv.Itoa(r.Node)+" done") {
			failed = true
			t.Errorf("%s did not run the test body (a -test.run mismatch?)", j.Layout.Describe(r.Node))
		}
	}
	if failed {
		t.Logf("node outputs:\n%s", j.outputs())
	}
}
