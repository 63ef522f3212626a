package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/internal/env"
)

// Binaries built once for the tests: the gompj command and the programs it runs.
var bin struct {
	dir, gompj, faulty, hello, ring string
	root                            string // the module root
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gompj-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.dir = dir
	wd, _ := os.Getwd()
	bin.root = filepath.Join(wd, "..", "..")
	build := func(name, pkg string) string {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = bin.root
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, b)
			os.RemoveAll(dir)
			os.Exit(1)
		}
		return out
	}
	bin.gompj = build("gompj", "./cmd/gompj")
	bin.faulty = build("faulty", "./cmd/gompj/testdata/faulty")
	bin.hello = build("hello", "./examples/hello")
	bin.ring = build("ring", "./examples/ring")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// runGompj runs the gompj command with args (in the module root) and waits at most a minute.
func runGompj(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin.gompj, args...)
	cmd.Dir = bin.root
	cmd.Env = append(os.Environ(), env...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("gompj %v hung; stderr:\n%s", args, se.String())
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: so.String(), stderr: se.String(), took: time.Since(start)}
}

func TestRunOneNode(t *testing.T) {
	r := runGompj(t, nil, "run", "-np", "4", bin.hello)
	if r.code != 0 || strings.Count(r.stdout, "hello from rank") != 4 || !strings.Contains(r.stdout, "of 4") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestRunBuildsPackage(t *testing.T) {
	r := runGompj(t, nil, "run", "-np", "3", "-nodes", "3", "./examples/hello")
	pids := map[string]bool{}
	for _, m := range regexp.MustCompile(`pid (\d+)`).FindAllStringSubmatch(r.stdout, -1) {
		pids[m[1]] = true
	}
	if r.code != 0 || strings.Count(r.stdout, "hello from rank") != 3 || len(pids) != 3 {
		t.Fatalf("exit %d, %d processes\n%s%s", r.code, len(pids), r.stdout, r.stderr)
	}
}

func TestRunNodesPrefix(t *testing.T) {
	r := runGompj(t, nil, "run", "-np", "7", "-nodes", "3", "-prefix", bin.ring, "50")
	if r.code != 0 || !strings.Contains(r.stdout, "[0-2] ring: 7 ranks, 50 laps, token 1050: ok") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runGompj(t, nil, "run", "-np", "5", "-ranks-per-node", "2", "-prefix-node", bin.faulty, "ok")
	if r.code != 0 || !strings.Contains(r.stdout, "[node 2] OK rank 4") || !strings.Contains(r.stdout, "[node 0] OK rank 1") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestRunExitStatusIsTheWorst(t *testing.T) {
	r := runGompj(t, nil, "run", "-np", "4", "-nodes", "2", bin.faulty, "abort", "3")
	if r.code != 3 || !strings.Contains(r.stderr, "node 1 (ranks 2-3) aborted the job (code 3)") ||
		!regexp.MustCompile(`gompj run: node [01] \(ranks [02]-[13]\) exited with status 3`).MatchString(r.stderr) ||
		strings.Count(r.stdout, "ABORTED rank") != 3 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// A one-node job's process killed by a signal: the launcher says so, as for a node of a larger job.
func TestRunOneNodeKilled(t *testing.T) {
	r := runGompj(t, nil, "run", "-np", "2", bin.faulty, "kill")
	if r.code != 137 || !strings.Contains(r.stderr, "gompj run: the job's process (2 ranks) was killed by signal 9") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestRunPanicEndsJob(t *testing.T) {
	r := runGompj(t, nil, "run", "-np", "4", "-nodes", "2", "-prefix", bin.faulty, "panic")
	t.Logf("the job ended %v after it started", r.took.Round(time.Millisecond))
	if r.code == 0 || !strings.Contains(r.stderr, "[2-3] rank 3 panicked: faulty: deliberate panic") ||
		!strings.Contains(r.stderr, "[0-1] gompj: node 1 (ranks 2-3) aborted the job (code 1): rank 3 panicked") ||
		!strings.Contains(r.stderr, "goroutine ") || r.took > hangBound {
		t.Fatalf("exit %d after %v\n%s%s", r.code, r.took, r.stdout, r.stderr)
	}
}

// hangBound is how long a job that must end promptly may take before a test fails. The requirement is far
// tighter (a dead node or a signal ends the job within 5 s, in practice well under a second), but a loaded CI
// machine stretches every wall-clock time, so the tests log how long it took and fail only at a delay no load
// explains: a hang.
const hangBound = 30 * time.Second

// startReady starts `gompj run ... faulty ready` and returns once every rank printed READY, with each rank's pid.
func startReady(t *testing.T, args ...string) (*exec.Cmd, map[int]int, *strings.Builder, *strings.Builder, chan error) {
	t.Helper()
	return startReadyEnv(t, nil, args...)
}

// startReadyEnv is startReady with extra environment variables.
func startReadyEnv(t *testing.T, env []string, args ...string) (*exec.Cmd, map[int]int, *strings.Builder, *strings.Builder, chan error) {
	t.Helper()
	cmd := exec.Command(bin.gompj, append(append([]string{"run"}, args...), bin.faulty, "ready")...)
	cmd.Dir = bin.root
	cmd.Env = append(os.Environ(), env...)
	var so, se strings.Builder
	var mu sync.Mutex
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	np := 0
	for i, a := range args {
		if a == "-np" {
			np, _ = strconv.Atoi(args[i+1])
		}
	}
	pids := map[int]int{}
	ready := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(pr)
		re := regexp.MustCompile(`READY rank (\d+) pid (\d+)`)
		for sc.Scan() {
			mu.Lock()
			so.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				r, _ := strconv.Atoi(m[1])
				p, _ := strconv.Atoi(m[2])
				pids[r] = p
				if len(pids) == np {
					close(ready)
				}
			}
			mu.Unlock()
		}
	}()
	done := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); <-drained; done <- err }() // so is complete once done is
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the job ended early (%v)\n%s%s", err, so.String(), se.String())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no READY from every rank\n%s%s", so.String(), se.String())
	}
	mu.Lock()
	defer mu.Unlock()
	return cmd, pids, &so, &se, done
}

// waitExit waits for the launcher to end, at most hangBound, and logs how long it took.
func waitExit(t *testing.T, cmd *exec.Cmd, done chan error) int {
	t.Helper()
	start := time.Now()
	select {
	case <-done:
	case <-time.After(hangBound):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the launcher did not end within %v", hangBound)
	}
	t.Logf("the launcher ended %v later", time.Since(start).Round(time.Millisecond))
	return cmd.ProcessState.ExitCode()
}

// TestKillNodeAbortsJob: a node process killed with SIGKILL ends the job within 5 s, every other rank's call
// returning an error that names the lost node, whichever device served it: shared memory (node processes on one
// host, the default) or TCP. The launcher names it as well.
func TestKillNodeAbortsJob(t *testing.T) {
	for _, dev := range []struct {
		name string
		env  []string
	}{{"shm", nil}, {"tcp", []string{"GOMPJ_HOST_SHM=0"}}} {
		t.Run(dev.name, func(t *testing.T) { killNode(t, dev.env) })
	}
}

func killNode(t *testing.T, env []string) {
	cmd, pids, so, se, done := startReadyEnv(t, env, "-np", "6", "-nodes", "3")
	victim := pids[4] // node 2 hosts ranks 4-5
	if victim == 0 || pids[5] != victim {
		t.Fatalf("pids %v", pids)
	}
	if p, _ := os.FindProcess(victim); p == nil || p.Signal(os.Kill) != nil {
		t.Fatalf("cannot kill node 2's process %d", victim)
	}
	if code := waitExit(t, cmd, done); code == 0 {
		t.Errorf("exit %d", code)
	}
	out := so.String() + se.String()
	for r := range 4 {
		if !regexp.MustCompile(fmt.Sprintf(`ABORTED rank %d: .*lost node 2 \(ranks 4-5\)`, r)).MatchString(out) {
			t.Errorf("rank %d: no ErrAborted naming the lost node 2 (ranks 4-5)", r)
		}
	}
	// The launcher says so too, whatever the program prints.
	if !strings.Contains(se.String(), "gompj run: node 2 (ranks 4-5) was killed by signal 9 (killed)") {
		t.Errorf("the launcher did not name the killed node")
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

func TestInterruptStopsJob(t *testing.T) {
	cmd, pids, so, se, done := startReady(t, "-np", "4", "-nodes", "2")
	cmd.Process.Signal(os.Interrupt)
	if code := waitExit(t, cmd, done); code != 130 {
		t.Errorf("exit %d\n%s%s", code, so.String(), se.String())
	}
	for r, pid := range pids {
		// Signal 0 checks that a process exists without signalling it.
		if p, err := os.FindProcess(pid); err == nil && !errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone) {
			t.Errorf("rank %d's process %d still exists after the launcher ended", r, pid)
		}
	}
}

// TestQuitPrintsStacks: SIGQUIT (Ctrl-\) to the launcher makes every node process print its goroutines' stacks,
// the ranks' among them, where a job that hangs is stuck; then the job ends.
func TestQuitPrintsStacks(t *testing.T) {
	for _, job := range []struct {
		args  []string
		procs int
	}{{[]string{"-np", "4", "-nodes", "2"}, 2}, {[]string{"-np", "2"}, 1}} {
		cmd, _, so, se, done := startReady(t, job.args...)
		cmd.Process.Signal(syscall.SIGQUIT)
		if code := waitExit(t, cmd, done); code == 0 {
			t.Errorf("%v: exit %d", job.args, code)
		}
		if out := se.String(); strings.Count(out, "SIGQUIT: quit") != job.procs || !strings.Contains(out, "main.body(") {
			t.Errorf("%v: no stacks of every node process's ranks\n%s%s", job.args, so.String(), out)
		}
	}
}

func TestBenchAcrossNodes(t *testing.T) {
	r := runGompj(t, nil, "bench", "latency", "-np", "2", "-nodes", "2", "-sizes", "0,1K,256K", "-iters", "200")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 5 || !strings.HasPrefix(lines[1], "# Size") || !strings.HasPrefix(lines[4], "262144 ") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runGompj(t, nil, "bench", "latency-any", "-np", "4", "-ranks-per-node", "2", "-sizes", "8", "-iters", "200", "-json")
	if r.code != 0 || !strings.Contains(r.stdout, `"benchmark": "latency-any"`) {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// osu_mbw_mr pairs rank i with i+2: both pairs cross the two node processes.
	r = runGompj(t, nil, "bench", "mbw_mr", "-np", "4", "-ranks-per-node", "2", "-sizes", "8", "-iters", "20")
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 4 || lines[1] != "# [ pairs: 2 ] [ window size: 64 ]" || !strings.HasPrefix(lines[3], "8 ") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestInfoAndHelp(t *testing.T) {
	r := runGompj(t, []string{"GOMPJ_STRIPES=3"}, "info")
	if r.code != 0 || !regexp.MustCompile(`GOMPJ_STRIPES\s+3\s+env`).MatchString(r.stdout) ||
		!regexp.MustCompile(`GOMPJ_NET_EAGER_LIMIT\s+131072\s+default`).MatchString(r.stdout) || !strings.Contains(r.stdout, "rdma") {
		t.Fatalf("info: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	misspelt := "GOMPJ_" + "SPNI" // spelt in two pieces, or internal/env's TestEveryNameIsDefined would object
	r = runGompj(t, []string{misspelt + "=1us", "GOMPJ_COLL_ALLREDUSE=ring"}, "info")
	if !regexp.MustCompile(misspelt+`\s+not a gompj variable`).MatchString(r.stdout) ||
		!regexp.MustCompile(`GOMPJ_COLL_ALLREDUSE\s+not a gompj variable`).MatchString(r.stdout) {
		t.Errorf("info does not flag a misspelt variable:\n%s", r.stdout)
	}
	r = runGompj(t, nil, "help")
	for _, v := range []string{"GOMPJ_NODES", "GOMPJ_SECRET", "GOMPJ_COORDINATOR_SERVE", "GOMPJ_SSH", "run", "bench", "info"} {
		if !strings.Contains(r.stdout, v) {
			t.Errorf("help does not mention %s", v)
		}
	}
	// help env lists every variable but the tests' (starred when a job must agree), and every algorithm each
	// GOMPJ_COLL_<NAME> accepts.
	r = runGompj(t, nil, "help", "env")
	for _, v := range env.All() {
		name := v.Name
		if v.Job {
			name += "*"
		}
		if listed := strings.Contains(r.stdout, " "+name+" "); listed != (v.Role != env.Test) {
			t.Errorf("help env: %s listed %v", name, listed)
		}
	}
	for _, c := range collectives.Collectives() {
		re := regexp.MustCompile(`(?m)^\s+` + strings.ToUpper(c) + `:\s+(.*)$`)
		m := re.FindStringSubmatch(r.stdout)
		if m == nil || m[1] != strings.Join(collectives.Algorithms(c), ", ") {
			t.Errorf("help env: the algorithms of %s: %q", c, m)
		}
	}
	r = runGompj(t, nil, "help", "run")
	for _, f := range []string{"-np", "-nodes", "-hosts", "-hostfile", "-ranks-per-node", "-dev", "-prefix"} {
		if !strings.Contains(r.stdout, f) {
			t.Errorf("help run does not document %s", f)
		}
	}
	if r := runGompj(t, nil, "run", "-np", "2", "-dev", "rdma", bin.hello); r.code != 2 || !strings.Contains(r.stderr, "built without ofi: rebuild with -tags ofi") {
		t.Errorf("-dev rdma: exit %d %s", r.code, r.stderr)
	}
}

// TestInfoBind: with GOMPJ_BIND=cores the node processes of one host each bind to their own part of its CPUs and say
// which in the route table; a value other than none or cores fails the job, naming the variable.
func TestInfoBind(t *testing.T) {
	r := runGompj(t, []string{"GOMPJ_BIND=cores"}, "info", "-np", "2", "-nodes", "2")
	bound := regexp.MustCompile(`(?m)^  cores +CPUs (\S+), GOMAXPROCS \d+: node process (\d) of 2 on this host`)
	lines := bound.FindAllStringSubmatch(r.stdout, -1)
	if r.code != 0 || len(lines) != 2 || lines[0][2] == lines[1][2] {
		t.Fatalf("GOMPJ_BIND=cores info -nodes 2: exit %d, want one cores line per node process\n%s%s", r.code,
			r.stdout, r.stderr)
	}
	if runtime.NumCPU() >= 2 && lines[0][1] == lines[1][1] {
		t.Errorf("both node processes bound to CPUs %s, want disjoint parts of %d CPUs", lines[0][1], runtime.NumCPU())
	}
	if r := runGompj(t, nil, "info", "-np", "2", "-nodes", "2"); strings.Contains(r.stdout, "GOMPJ_BIND=cores") {
		t.Errorf("unbound by default, but:\n%s", r.stdout)
	}
	r = runGompj(t, []string{"GOMPJ_BIND=sockets"}, "info", "-np", "2", "-nodes", "2")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, `GOMPJ_BIND="sockets": want none or cores`) {
		t.Errorf("GOMPJ_BIND=sockets: exit %d, want a failure naming the variable\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestInfoRoutes: gompj info says how the host device works here and, with -nodes, starts a job whose node
// processes print which device serves which peers: shared memory on one host, tcp with GOMPJ_HOST_SHM=0, the rings
// alone with GOMPJ_CMA=0.
func TestInfoRoutes(t *testing.T) {
	r := runGompj(t, nil, "info")
	if r.code != 0 || !regexp.MustCompile(`(?m)^  shm\s+same host: .*built; large messages`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "routes: a peer node process on this host: shm") {
		t.Fatalf("info: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, `shm +nodes 1-2: shm: rings in shared memory, large messages in one copy`},
		{[]string{"GOMPJ_HOST_SHM=0"}, `tcp +nodes 1-2: tcp`},
		{[]string{"GOMPJ_CMA=0"}, `shm +nodes 1-2: shm: .*copied through the rings \(CMA off: GOMPJ_CMA=0\)`},
	} {
		r := runGompj(t, c.env, "info", "-np", "3", "-nodes", "3")
		if r.code != 0 || strings.Count(r.stdout, "routes of node") != 3 || !regexp.MustCompile(c.want).MatchString(r.stdout) {
			t.Errorf("info -nodes 3 with %v: exit %d, want %q\n%s%s", c.env, r.code, c.want, r.stdout, r.stderr)
		}
	}
}
