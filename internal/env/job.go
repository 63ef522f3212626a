package env

import (
	"strconv"
	"strings"
	"time"
)

// Job is the identity a starter gives one node process of a job: the contract between `gompj run`, the test
// harness, a batch script or any other starter, and node.FromEnv. Zero fields are left out.
type Job struct {
	Ranks, Nodes, Node, RanksPerNode int
	Coordinator                      string
	ServeCoordinator                 bool
	// Secret goes into the environment, which on Linux only the same user and root can read. A node process on
	// another host gets it on its standard input instead (SecretStdin), never on a command line.
	Secret      string
	SecretStdin bool
	// Timeout is the bootstrap timeout (`gompj run -timeout`); it is a Tuning variable, so a starter that sets
	// it overrides the one it inherited.
	Timeout time.Duration
}

// Env returns j as NAME=value assignments.
func (j Job) Env() []string {
	var out []string
	num := func(v *Var, n int) {
		if n > 0 || v == NodeID && j.Nodes > 1 {
			out = append(out, v.Name+"="+strconv.Itoa(n))
		}
	}
	num(NP, j.Ranks)
	num(Nodes, j.Nodes)
	num(NodeID, j.Node)
	num(RanksPerNode, j.RanksPerNode)
	if j.Coordinator != "" {
		out = append(out, Coordinator.Name+"="+j.Coordinator)
	}
	if j.ServeCoordinator {
		out = append(out, CoordinatorServe.Name+"=1")
	}
	if j.Secret != "" {
		out = append(out, Secret.Name+"="+j.Secret)
	}
	if j.SecretStdin {
		out = append(out, SecretStdin.Name+"=1")
	}
	if j.Timeout > 0 {
		out = append(out, Timeout.Name+"="+j.Timeout.String())
	}
	return out
}

// Environ returns the environment of a node process on this host: base (the starter's own environment) without
// any Identity variable or variable j sets, followed by j's assignments. A starter's own identity (it may itself
// run inside a job) never leaks into the job it starts.
func (j Job) Environ(base []string) []string {
	mine := j.Env()
	set := map[string]bool{}
	for _, kv := range mine {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	var out []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if v := Find(k); set[k] || v != nil && v.Role == Identity {
			continue
		}
		out = append(out, kv)
	}
	return append(out, mine...)
}

// Forwarded returns the GOMPJ_* entries of environ that a node process on another host must get from the
// launcher (the remote login environment has none of them): every Tuning variable, and GOMPJ_* names no
// definition knows (they may be the program's own). Identity variables come from Job, Host variables describe
// the launcher's host, Launcher and Test variables concern nobody else.
func Forwarded(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "GOMPJ_") {
			continue
		}
		if v := Find(k); v == nil || v.Role == Tuning {
			out = append(out, kv)
		}
	}
	return out
}
