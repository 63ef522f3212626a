package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Multi-host tests: node processes in Linux network namespaces joined by veth pairs to a bridge (itself in a
// namespace of its own), so that their traffic crosses real interfaces. Only addresses inside the namespaces the
// test creates are used. Where namespaces cannot be made (not root, no CAP_SYS_ADMIN) or a tool is missing, the
// tests skip, except under CI (CI=true, which CI sets and .ci/run exports), where they fail: there a skip would
// hide that the multi-host paths went untested.

// skipUnlessCI skips the test, or fails it under CI.
func skipUnlessCI(t *testing.T, format string, args ...any) {
	t.Helper()
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("CI=true, so this test may not skip: "+format, args...)
	}
	t.Skipf(format, args...)
}

type netns struct {
	sw    string   // the namespace holding the bridge
	hosts []string // one namespace per host
	ips   []string
}

func newNetns(t *testing.T, n int) *netns {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		skipUnlessCI(t, "multi-host test skipped: no ip command (apt-get install iproute2)")
	}
	id := strconv.Itoa(os.Getpid() % 100000)
	subnet := fmt.Sprintf("10.231.%d", os.Getpid()%200+20)
	ns := &netns{sw: "gpj" + id + "s"}
	if out, err := exec.Command("ip", "netns", "add", ns.sw).CombinedOutput(); err != nil {
		skipUnlessCI(t, "multi-host test skipped: network namespaces not permitted here (ip netns add: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		for _, h := range append([]string{ns.sw}, ns.hosts...) {
			exec.Command("ip", "netns", "del", h).Run()
		}
	})
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("-n", ns.sw, "link", "add", "br0", "type", "bridge")
	ip("-n", ns.sw, "link", "set", "br0", "up")
	for i := range n {
		h := fmt.Sprintf("gpj%sh%d", id, i)
		ip("netns", "add", h)
		ns.hosts = append(ns.hosts, h)
		sv, hv := fmt.Sprintf("s%d", i), fmt.Sprintf("eth%d", i)
		ip("-n", ns.sw, "link", "add", sv, "type", "veth", "peer", "name", hv, "netns", h)
		ip("-n", ns.sw, "link", "set", sv, "master", "br0", "up")
		addr := fmt.Sprintf("%s.%d", subnet, i+1)
		ns.ips = append(ns.ips, addr)
		ip("-n", h, "addr", "add", addr+"/24", "dev", hv)
		ip("-n", h, "link", "set", hv, "up")
		ip("-n", h, "link", "set", "lo", "up")
	}
	return ns
}

// rxBytes is what host i's interface has received.
func (ns *netns) rxBytes(t *testing.T, i int) int64 {
	out, err := exec.Command("ip", "netns", "exec", ns.hosts[i], "cat", fmt.Sprintf("/sys/class/net/eth%d/statistics/rx_bytes", i)).Output()
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	return n
}

func secretHex() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TestNetnsOtherStarter starts the node processes itself, as a batch system would, with the documented
// environment; node 0 serves the coordinator. The bandwidth benchmark moves real data across the veth pairs.
func TestNetnsOtherStarter(t *testing.T) {
	ns := newNetns(t, 3)
	before := ns.rxBytes(t, 1)
	secret := secretHex()
	var cmds []*exec.Cmd
	outs := make([]*strings.Builder, 3)
	for i := range 3 {
		cmd := exec.Command("ip", "netns", "exec", ns.hosts[i], bin.gompj, "bench-node", "bw", "-sizes", "1M", "-iters", "8", "-warmup", "1")
		cmd.Env = append(os.Environ(), "GOMPJ_NP=3", "GOMPJ_NODES=3", "GOMPJ_NODE_ID="+strconv.Itoa(i),
			"GOMPJ_COORDINATOR="+net.JoinHostPort(ns.ips[0], "7411"), "GOMPJ_SECRET="+secret, "GOMPJ_TIMEOUT=20s")
		if i == 0 {
			cmd.Env = append(cmd.Env, "GOMPJ_COORDINATOR_SERVE=1")
		}
		outs[i] = &strings.Builder{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("node %d: %v\n%s", i, err, outs[i].String())
			}
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("node %d hung\n%s", i, outs[i].String())
		}
	}
	if !strings.Contains(outs[0].String(), "1048576") {
		t.Errorf("no bandwidth line from rank 0:\n%s", outs[0].String())
	}
	if got := ns.rxBytes(t, 1) - before; got < 9<<20 {
		t.Errorf("host 1 received %d bytes over its interface, want at least 9 MiB", got)
	}
}

// sshd starts Debian's sshd in host namespace i on port 2222 with a host key and the client key in dir, and
// returns once it listens.
func (ns *netns) sshd(t *testing.T, i int, dir string) {
	t.Helper()
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		skipUnlessCI(t, "ssh test skipped: no /usr/sbin/sshd (apt-get install openssh-server)")
	}
	os.MkdirAll("/run/sshd", 0o755) // privilege separation directory
	conf := filepath.Join(dir, fmt.Sprintf("sshd%d.conf", i))
	os.WriteFile(conf, []byte(fmt.Sprintf(`Port 2222
ListenAddress %s
HostKey %s/hostkey
PidFile %s/sshd%d.pid
AuthorizedKeysFile %s/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
`, ns.ips[i], dir, dir, i, dir)), 0o600)
	cmd := exec.Command("ip", "netns", "exec", ns.hosts[i], sshd, "-D", "-e", "-f", conf)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	listening := make(chan struct{})
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "Server listening on") {
				close(listening)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-listening:
	case <-time.After(15 * time.Second):
		t.Fatalf("sshd in %s did not start", ns.hosts[i])
	}
}

// TestSSHHosts runs `gompj run -hosts` in host namespace 0 against real sshd servers in namespaces 1 and 2.
func TestSSHHosts(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		skipUnlessCI(t, "ssh test skipped: no ssh client (apt-get install openssh-client)")
	}
	ns := newNetns(t, 3)
	dir := t.TempDir()
	for _, k := range []string{"hostkey", "id"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v %s", err, out)
		}
	}
	pub, _ := os.ReadFile(filepath.Join(dir, "id.pub"))
	os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600)
	ns.sshd(t, 1, dir)
	ns.sshd(t, 2, dir)
	sshCmd := fmt.Sprintf("ssh -p 2222 -i %s/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR", dir)
	cmd := exec.Command("ip", "netns", "exec", ns.hosts[0], bin.gompj, "run", "-np", "5", "-hosts", ns.ips[1]+","+ns.ips[2],
		"-prefix", bin.faulty, "ok")
	cmd.Env = append(os.Environ(), "GOMPJ_SSH="+sshCmd)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("gompj run -hosts: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("gompj run -hosts hung\n%s", out.String())
	}
	for r := range 5 {
		prefix := "[0-2] "
		if r > 2 {
			prefix = "[3-4] "
		}
		if !strings.Contains(out.String(), fmt.Sprintf("%sOK rank %d ", prefix, r)) {
			t.Errorf("no OK from rank %d:\n%s", r, out.String())
		}
	}
}

// TestSlurmEnvironment starts 3 processes with the variables srun sets for `srun -N 3 --ntasks-per-node=1`; no
// launcher, no GOMPJ_* identity: the job finds its node ids, its coordinator and its secret by itself.
func TestSlurmEnvironment(t *testing.T) {
	keyDir := t.TempDir()
	var cmds []*exec.Cmd
	outs := make([]*strings.Builder, 3)
	for i := range 3 {
		cmd := exec.Command(bin.faulty, "ok")
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "GOMPJ_") && !strings.HasPrefix(kv, "SLURM_") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, "SLURM_JOB_ID=77"+strconv.Itoa(os.Getpid()%1000), "SLURM_STEP_ID=0", "SLURM_PROCID="+strconv.Itoa(i),
			"SLURM_NODEID="+strconv.Itoa(i), "SLURM_LOCALID=0", "SLURM_NTASKS=3", "SLURM_STEP_NUM_TASKS=3", "SLURM_NNODES=3",
			"SLURM_JOB_NODELIST=localhost", "SLURM_STEP_NODELIST=localhost", "SLURM_CPUS_ON_NODE=2",
			"GOMPJ_KEY_FILE="+filepath.Join(keyDir, "key"), "GOMPJ_TIMEOUT=20s")
		outs[i] = &strings.Builder{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	all := ""
	for i, cmd := range cmds {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("task %d: %v\n%s", i, err, outs[i].String())
			}
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("task %d hung\n%s", i, outs[i].String())
		}
		all += outs[i].String()
	}
	// SLURM_CPUS_ON_NODE=2 ranks per node: 6 ranks.
	for r := range 6 {
		if !strings.Contains(all, fmt.Sprintf("OK rank %d ", r)) {
			t.Errorf("no OK from rank %d:\n%s", r, all)
		}
	}
	if st, err := os.Stat(filepath.Join(keyDir, "key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", st, err)
	}
}
