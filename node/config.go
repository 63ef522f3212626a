package node

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Config configures a job. Zero fields take their defaults; FromEnv fills them from GOMPJ_* variables (and, under
// srun, from Slurm's SLURM_* variables; see slurm.go).
type Config struct {
	// Ranks is the number of ranks in the job (GOMPJ_NP; default runtime.NumCPU() on one node, the node's CPUs
	// times the nodes on several).
	Ranks int
	// EagerLimit is the intra-node protocol switch in bytes: messages up to it are copied eagerly, larger ones go
	// rendezvous (GOMPJ_EAGER_LIMIT; default 64 KiB).
	EagerLimit int
	// Pin locks each rank's goroutine to an OS thread bound to core rank % NumCPU (GOMPJ_PIN=1; default off).
	Pin bool
	// SpinTime is how long a waiting rank spins before it yields and parks (GOMPJ_SPIN, a Go duration such as
	// 20us; default 50us when the node's ranks fit its cores, else no spinning). A negative value means none.
	SpinTime time.Duration
	// NetSpin is how long a rank spins, polling the network device itself, when it waits for something that may
	// come from another node (GOMPJ_NET_SPIN, a Go duration; default 1ms when the node's ranks fit its cores, else
	// no spinning). A negative value means none.
	NetSpin time.Duration
	// Yields is how many times a waiting rank yields the processor after spinning, before it parks
	// (GOMPJ_YIELDS; default 50, or 10 when ranks outnumber cores).
	Yields int

	// Multi-node jobs. With Nodes <= 1 the job runs on this box alone and the fields below are ignored.

	// Nodes is the number of node processes in the job (GOMPJ_NODES; default 1).
	Nodes int
	// NodeID is this process's node id in [0, Nodes) (GOMPJ_NODE_ID).
	NodeID int
	// RanksPerNode fixes the ranks per node: node i hosts ranks [i*K, (i+1)*K) (GOMPJ_RANKS_PER_NODE; default 0:
	// blocks of Ranks/Nodes, the first Ranks%Nodes nodes one more).
	RanksPerNode int
	// Coordinator is the host:port of the job's bootstrap coordinator (GOMPJ_COORDINATOR).
	Coordinator string
	// ServeCoordinator makes node 0 run the coordinator itself, listening on Coordinator
	// (GOMPJ_COORDINATOR_SERVE=1; `gompj run` runs it in the launcher instead; Slurm jobs set it on task 0).
	ServeCoordinator bool
	// Secret is the job secret every connection proves (GOMPJ_SECRET, at least 16 bytes; with GOMPJ_SECRET_STDIN=1
	// it is the first line of standard input, which is how `gompj run -hosts` hands it over ssh).
	Secret []byte
	// Listen is this node's network listen address, host or host:port (GOMPJ_LISTEN; default: the local address
	// of the interface that routes to the coordinator, port chosen by the kernel).
	Listen string
	// NetEagerLimit is the network protocol switch in bytes (GOMPJ_NET_EAGER_LIMIT; default 128 KiB).
	NetEagerLimit int
	// Stripes is the number of TCP connections per node pair (GOMPJ_STRIPES; default 1).
	Stripes int
	// Lazy connects to a node on the first message for it instead of at start (GOMPJ_LAZY=1).
	Lazy bool
	// BusyPoll is how long the network progress loop polls before it sleeps (GOMPJ_BUSY_POLL, a Go duration;
	// default 50us; 0 in the environment or a negative value disables it).
	BusyPoll time.Duration
	// Timeout bounds the bootstrap: every node registered with the coordinator, the mesh connected, the start
	// barrier (GOMPJ_TIMEOUT, a Go duration; default 30s). The finalize barrier waits as long as the slowest node.
	Timeout time.Duration
	// UnexpectedLimit bounds the unexpected eager bytes a node holds from the network, split over its peers
	// (GOMPJ_UNEXPECTED_LIMIT; default 64 MiB).
	UnexpectedLimit int64

	// sources records where fields came from ("env", "slurm"), by variable name, for `gompj info`.
	sources map[string]string
}

// Variables lists the environment variables gompj reads, with their meaning, for `gompj help`.
var Variables = [][2]string{
	{"GOMPJ_NP", "number of ranks in the job (default: the number of CPUs; on several nodes, CPUs per node × nodes)"},
	{"GOMPJ_EAGER_LIMIT", "intra-node protocol switch in bytes; larger messages go rendezvous (default 65536)"},
	{"GOMPJ_PIN", "1 pins each rank to a core (default 0)"},
	{"GOMPJ_SPIN", "how long a waiting rank spins before yielding, a Go duration (default 50us when ranks <= cores, else 0)"},
	{"GOMPJ_NET_SPIN", "how long a rank waiting on the network spins, polling the device itself, a Go duration (default 1ms when ranks <= cores, else 0)"},
	{"GOMPJ_YIELDS", "how often a waiting rank yields before it parks (default 50, or 10 when ranks > cores)"},
	{"GOMPJ_NODES", "number of node processes in the job (default 1: this box only)"},
	{"GOMPJ_NODE_ID", "this process's node id, 0 .. GOMPJ_NODES-1"},
	{"GOMPJ_RANKS_PER_NODE", "ranks per node: node i hosts ranks i*K .. i*K+K-1 (default: even blocks, remainder to the first nodes)"},
	{"GOMPJ_COORDINATOR", "host:port of the job's bootstrap coordinator (multi-node jobs)"},
	{"GOMPJ_COORDINATOR_SERVE", "1: node 0 runs the coordinator itself on GOMPJ_COORDINATOR (default 0; Slurm task 0: 1)"},
	{"GOMPJ_SECRET", "the job secret, at least 16 bytes, proved by every connection (never put it on a command line)"},
	{"GOMPJ_SECRET_STDIN", "1: read the job secret from the first line of standard input (used by `gompj run -hosts` over ssh)"},
	{"GOMPJ_LISTEN", "this node's network listen address, host or host:port (default: the local address that routes to the coordinator)"},
	{"GOMPJ_NET_EAGER_LIMIT", "network protocol switch in bytes; larger messages go rendezvous (default 131072)"},
	{"GOMPJ_STRIPES", "TCP connections per pair of nodes (default 1)"},
	{"GOMPJ_LAZY", "1 connects to a node on the first message for it, not at start (default 0)"},
	{"GOMPJ_BUSY_POLL", "how long the network progress loop polls before sleeping, a Go duration; 0 disables (default 50us)"},
	{"GOMPJ_TIMEOUT", "bootstrap timeout (registration, connections, start barrier), a Go duration (default 30s)"},
	{"GOMPJ_UNEXPECTED_LIMIT", "unexpected eager bytes a node holds from the network before senders switch to rendezvous (default 67108864)"},
	{"GOMPJ_PORT", "Slurm: the coordinator's port (default derived from SLURM_JOB_ID and SLURM_STEP_ID, 12000-29999)"},
	{"GOMPJ_NO_SLURM", "1 ignores the SLURM_* variables"},
	{"GOMPJ_COLL_TABLE", "file of collective selection rules tried before the built-in table, one a line: " +
		"<collective> <local|multi|*> <ranks lo-hi|*> <bytes lo-hi|*> <algorithm> ('#' comments; bytes take K, M, G; " +
		"`gompj info` prints the table in force)"},
	{"GOMPJ_COLL_<NAME>", "algorithm for collective NAME wherever it applies, e.g. GOMPJ_COLL_ALLREDUCE=ring. " +
		"BARRIER: dissemination, shm, hier; BCAST: binomial, linear, scatter_allgather, shm, hier; " +
		"REDUCE: binomial, shm, hier; ALLREDUCE: recursive_doubling, rabenseifner, ring, reduce_bcast, shm, hier; " +
		"GATHER: linear, binomial, shm, hier; GATHERV: linear, shm; SCATTER: linear, binomial, shm, hier; " +
		"SCATTERV: linear, shm; ALLGATHER: ring, recursive_doubling, bruck, shm, hier; ALLGATHERV: ring, shm; " +
		"ALLTOALL: pairwise, bruck, shm, hier; ALLTOALLV: pairwise, shm; " +
		"REDUCE_SCATTER: reduce_scatterv, ring, shm; SCAN, EXSCAN: chain, shm; " +
		"NEIGHBOR_ALLGATHER, NEIGHBOR_ALLGATHERV, NEIGHBOR_ALLTOALL, NEIGHBOR_ALLTOALLV: p2p, hybrid"},
}

// Defaults.
const (
	DefaultEagerLimit    = 64 << 10         // intra-node protocol switch
	DefaultNetEagerLimit = 128 << 10        // network protocol switch
	DefaultTimeout       = 30 * time.Second // bootstrap
)

// envReader fills zero fields from variables and records where each came from.
type envReader struct {
	c   *Config
	err error
}

func (e *envReader) lookup(name string) (string, bool) {
	v, ok := os.LookupEnv(name)
	if ok && e.err == nil {
		e.c.setSource(name, "env")
	}
	return strings.TrimSpace(v), ok && e.err == nil
}

func (e *envReader) int(name string, dst *int) {
	if *dst != 0 {
		return
	}
	if v, ok := e.lookup(name); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			e.err = fmt.Errorf("gompj: %s=%q is not a non-negative integer", name, v)
			return
		}
		*dst = n
	}
}

func (e *envReader) int64(name string, dst *int64) {
	n := int(*dst)
	e.int(name, &n)
	*dst = int64(n)
}

func (e *envReader) bool(name string, dst *bool) {
	if *dst {
		return
	}
	if v, ok := e.lookup(name); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			e.err = fmt.Errorf("gompj: %s=%q is not a boolean", name, v)
			return
		}
		*dst = b
	}
}

// duration reads a Go duration; "0" becomes -1 (explicitly off) when zeroOff.
func (e *envReader) duration(name string, dst *time.Duration, zeroOff bool) {
	if *dst != 0 {
		return
	}
	if v, ok := e.lookup(name); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			e.err = fmt.Errorf("gompj: %s=%q is not a duration", name, v)
			return
		}
		if d == 0 && zeroOff {
			d = -1
		}
		*dst = d
	}
}

func (e *envReader) string(name string, dst *string) {
	if *dst != "" {
		return
	}
	if v, ok := e.lookup(name); ok {
		*dst = v
	}
}

func (c *Config) setSource(name, src string) {
	if c.sources == nil {
		c.sources = map[string]string{}
	}
	c.sources[name] = src
}

// Source says where the setting of variable name came from: "env", "slurm", "config" or "default".
func (c *Config) Source(name string) string {
	if s, ok := c.sources[name]; ok {
		return s
	}
	return "default"
}

// FromEnv returns c with every zero field filled from the environment, or an error naming a malformed variable.
// Under srun (SLURM_STEP_ID set, GOMPJ_NODES unset, GOMPJ_NO_SLURM not 1) the node id, node count, coordinator
// and secret come from Slurm's variables.
func FromEnv(c Config) (Config, error) {
	e := &envReader{c: &c}
	e.int("GOMPJ_NP", &c.Ranks)
	e.int("GOMPJ_EAGER_LIMIT", &c.EagerLimit)
	e.int("GOMPJ_YIELDS", &c.Yields)
	e.bool("GOMPJ_PIN", &c.Pin)
	e.duration("GOMPJ_SPIN", &c.SpinTime, true)
	e.duration("GOMPJ_NET_SPIN", &c.NetSpin, true)
	e.int("GOMPJ_NODES", &c.Nodes)
	e.int("GOMPJ_NODE_ID", &c.NodeID)
	e.int("GOMPJ_RANKS_PER_NODE", &c.RanksPerNode)
	e.string("GOMPJ_COORDINATOR", &c.Coordinator)
	e.bool("GOMPJ_COORDINATOR_SERVE", &c.ServeCoordinator)
	if c.Secret == nil {
		var s string
		e.string("GOMPJ_SECRET", &s)
		if s != "" {
			c.Secret = []byte(s)
		}
	}
	e.string("GOMPJ_LISTEN", &c.Listen)
	e.int("GOMPJ_NET_EAGER_LIMIT", &c.NetEagerLimit)
	e.int("GOMPJ_STRIPES", &c.Stripes)
	e.bool("GOMPJ_LAZY", &c.Lazy)
	e.duration("GOMPJ_BUSY_POLL", &c.BusyPoll, true)
	e.duration("GOMPJ_TIMEOUT", &c.Timeout, false)
	e.int64("GOMPJ_UNEXPECTED_LIMIT", &c.UnexpectedLimit)
	if e.err != nil {
		return c, e.err
	}
	if err := fromSlurm(&c, os.LookupEnv); err != nil {
		return c, err
	}
	return c, nil
}

// withDefaults fills the remaining zero fields.
func (c Config) withDefaults() (Config, error) {
	if c.Ranks < 0 || c.EagerLimit < 0 || c.Yields < 0 || c.Nodes < 0 || c.NodeID < 0 || c.RanksPerNode < 0 ||
		c.NetEagerLimit < 0 || c.Stripes < 0 || c.Timeout < 0 || c.UnexpectedLimit < 0 {
		return c, fmt.Errorf("gompj: negative value in the configuration")
	}
	if c.Nodes == 0 {
		c.Nodes = 1
	}
	if c.Ranks == 0 {
		switch {
		case c.Nodes > 1 && c.RanksPerNode > 0:
			c.Ranks = c.Nodes * c.RanksPerNode
		default:
			c.Ranks = runtime.NumCPU() * c.Nodes
		}
	}
	if c.EagerLimit == 0 {
		c.EagerLimit = DefaultEagerLimit
	}
	if c.NetEagerLimit == 0 {
		c.NetEagerLimit = DefaultNetEagerLimit
	}
	if c.Stripes == 0 {
		c.Stripes = 1
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Nodes > 1 && c.NodeID >= c.Nodes {
		return c, fmt.Errorf("gompj: node id %d outside [0,%d)", c.NodeID, c.Nodes)
	}
	return c, nil
}

// Setting is one configuration value and where it came from, for `gompj info`.
type Setting struct {
	Variable, Value, Source string
}

// Effective reads the configuration this process would run with (environment, Slurm, defaults) and lists every
// setting with its source. The secret is never shown, only whether there is one.
func Effective() ([]Setting, error) {
	c, err := FromEnv(Config{})
	if err != nil {
		return nil, err
	}
	d, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	dur := func(x time.Duration, def string) string {
		switch {
		case x < 0:
			return "off"
		case x == 0:
			return def
		}
		return x.String()
	}
	secret := "none"
	if len(d.Secret) > 0 {
		secret = fmt.Sprintf("set (%d bytes, hidden)", len(d.Secret))
	}
	coord, listen := d.Coordinator, d.Listen
	if coord == "" {
		coord = "-"
	}
	if listen == "" {
		listen = "auto (the interface that routes to the coordinator)"
	}
	vals := []Setting{
		{"GOMPJ_NP", strconv.Itoa(d.Ranks), ""},
		{"GOMPJ_EAGER_LIMIT", strconv.Itoa(d.EagerLimit), ""},
		{"GOMPJ_PIN", strconv.FormatBool(d.Pin), ""},
		{"GOMPJ_SPIN", dur(d.SpinTime, "auto (50us when ranks <= cores, else 0)"), ""},
		{"GOMPJ_NET_SPIN", dur(d.NetSpin, "auto (1ms when ranks <= cores, else 0)"), ""},
		{"GOMPJ_YIELDS", map[bool]string{true: strconv.Itoa(d.Yields), false: "auto (50, or 10 when ranks > cores)"}[d.Yields > 0], ""},
		{"GOMPJ_NODES", strconv.Itoa(d.Nodes), ""},
		{"GOMPJ_NODE_ID", strconv.Itoa(d.NodeID), ""},
		{"GOMPJ_RANKS_PER_NODE", map[bool]string{true: strconv.Itoa(d.RanksPerNode), false: "auto (even blocks)"}[d.RanksPerNode > 0], ""},
		{"GOMPJ_COORDINATOR", coord, ""},
		{"GOMPJ_COORDINATOR_SERVE", strconv.FormatBool(d.ServeCoordinator), ""},
		{"GOMPJ_SECRET", secret, ""},
		{"GOMPJ_LISTEN", listen, ""},
		{"GOMPJ_NET_EAGER_LIMIT", strconv.Itoa(d.NetEagerLimit), ""},
		{"GOMPJ_STRIPES", strconv.Itoa(d.Stripes), ""},
		{"GOMPJ_LAZY", strconv.FormatBool(d.Lazy), ""},
		{"GOMPJ_BUSY_POLL", dur(d.BusyPoll, "50us"), ""},
		{"GOMPJ_TIMEOUT", d.Timeout.String(), ""},
		{"GOMPJ_UNEXPECTED_LIMIT", map[bool]string{true: strconv.FormatInt(d.UnexpectedLimit, 10), false: "67108864"}[d.UnexpectedLimit > 0], ""},
	}
	for i := range vals {
		vals[i].Source = c.Source(vals[i].Variable)
	}
	return vals, nil
}
