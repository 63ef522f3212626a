package node

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/gompj/gompj/internal/env"
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
	// (GOMPJ_YIELDS; default 50, or 10 when ranks outnumber cores, or 3000 when only the host's node processes,
	// no more of them than cores, together hold more ranks than it has cores: see sharedHostYields).
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
	// Bind, "cores", binds the node processes that share a host each to its own equal part of the CPUs they may run
	// on (GOMPJ_BIND; default "none": the kernel places their threads anywhere). See bindShare.
	Bind string
	// TCPCongestion is the TCP congestion control of the tcp device's connections (GOMPJ_TCP_CC; default auto:
	// Reno within this host, the kernel's default to other hosts; system: the kernel's default everywhere; or an
	// algorithm's name, on every connection).
	TCPCongestion string
	// BusyPoll is how long a device's progress loop polls before it sleeps (GOMPJ_BUSY_POLL, a Go duration;
	// default 50us, but none when the host's ranks outnumber its cores; 0 in the environment or a negative value
	// disables it).
	BusyPoll time.Duration
	// Timeout bounds the bootstrap: every node registered with the coordinator, the mesh connected, the start
	// barrier (GOMPJ_TIMEOUT, a Go duration; default 30s). The finalize barrier waits as long as the slowest node.
	Timeout time.Duration
	// UnexpectedLimit bounds the unexpected eager data a node holds (GOMPJ_UNEXPECTED_LIMIT; default 64 MiB): from
	// the network, split over the peer nodes; from the node's own ranks, split over its ranks as a share per
	// receiving rank of at least 256 KiB (ranks.UnexpectedShare). Past the bound, eager sends turn rendezvous.
	UnexpectedLimit int64
	// UnexpectedShare, if positive, replaces that share per receiving rank, with no lower bound
	// (GOMPJ_UNEXPECTED_SHARE; for tests, which set a few KiB so that every stream of messages crosses it).
	UnexpectedShare int64
	// Dev is the device between node processes on different hosts: "tcp" (netdev) or "rdma" (libfabric, in a
	// build with -tags ofi) (GOMPJ_DEV, `gompj run -dev`; default tcp).
	Dev string
	// NoHostSHM routes node processes on the same host through Dev too, instead of shared memory
	// (GOMPJ_HOST_SHM=0; default: same-host peers share memory).
	NoHostSHM bool
	// NoCMA makes node processes on the same host copy large messages through their shared rings instead of
	// reading and writing each other's memory with process_vm_readv/writev (GOMPJ_CMA=0; default: CMA where the
	// kernel allows it).
	NoCMA bool
	// RegCacheBytes bounds the bytes the rdma devices keep registered in their pin-down cache of transfer buffers
	// (GOMPJ_REGCACHE_BYTES; default 1 GiB): past it the least recently used idle registrations are deregistered.
	RegCacheBytes int64

	// NbcSlots is the number of shared-memory slots per communicator for nonblocking collectives: that many may be
	// outstanding on a communicator inside a node before further ones queue (GOMPJ_NBC_SLOTS; default 16).
	NbcSlots int
	// Workers is the size of the node's worker pool, on which nonblocking collectives move on while the ranks
	// compute (GOMPJ_WORKERS; default GOMAXPROCS).
	Workers int
	// NoAsyncProgress turns the worker pool off (GOMPJ_ASYNC_PROGRESS=0): nonblocking collectives then move on only
	// inside the calls that start, test and wait for them, as in most MPI libraries. For comparisons.
	NoAsyncProgress bool
	// Overlap favours overlapping nonblocking collectives with computation over the time of a start followed at
	// once by its wait (GOMPJ_OVERLAP=1; default off), as MPICH's and Intel MPI's asynchronous progress threads
	// do. GOMAXPROCS gets one more processor (unless GOMAXPROCS is set), so that the device's progress loop and the
	// workers can run while every rank computes: the kernel shares the cores between them and the computation. And
	// the starting call of a nonblocking collective that crosses node processes hands its first round to the worker
	// pool and returns (ranks.Options.Overlap). Together with GOMPJ_BIND=cores where node processes share a host.
	Overlap bool
	// CallCheck is how often a node process of a multi-node job compares its ranks' latest collective calls on
	// communicators that span nodes with the other members' (ranks.World.CheckCalls), so that members that disagree
	// about a root, or about which collective comes next, end the job instead of hanging (GOMPJ_CALL_CHECK; default
	// 1 s; negative: never).
	CallCheck time.Duration

	// sources records where fields came from ("env", "slurm"), by variable name, for `gompj info`.
	sources map[string]string
}

// FromEnv returns c with every zero field filled from the environment (each field's variable is defined in
// internal/env), or an error naming a malformed variable. Under srun (SLURM_STEP_ID set, GOMPJ_NODES unset,
// GOMPJ_NO_SLURM not 1) the node id, node count, coordinator and secret come from Slurm's variables.
func FromEnv(c Config) (Config, error) {
	if err := env.Fill(&c, os.LookupEnv, func(name string) { c.setSource(name, "env") }); err != nil {
		return c, err
	}
	if err := fromSlurm(&c, os.LookupEnv); err != nil {
		return c, err
	}
	return c, nil
}

func (c *Config) setSource(name, src string) {
	if c.sources == nil {
		c.sources = map[string]string{}
	}
	c.sources[name] = src
}

// Source says where the setting of variable name came from: "env", "slurm" or "default".
func (c *Config) Source(name string) string {
	if s, ok := c.sources[name]; ok {
		return s
	}
	return "default"
}

// withDefaults fills the remaining zero fields: the literal defaults of internal/env's definitions, then the
// number of ranks, which depends on the machine. Spinning and yielding stay zero here: their defaults depend on
// how many ranks share the host's cores (see policy).
func (c Config) withDefaults() (Config, error) {
	if c.Ranks < 0 || c.EagerLimit < 0 || c.Yields < 0 || c.Nodes < 0 || c.NodeID < 0 || c.RanksPerNode < 0 ||
		c.NetEagerLimit < 0 || c.Stripes < 0 || c.Timeout < 0 || c.UnexpectedLimit < 0 || c.UnexpectedShare < 0 ||
		c.Workers < 0 || c.NbcSlots < 0 {
		return c, fmt.Errorf("gompj: negative value in the configuration")
	}
	env.Defaults(&c)
	if c.Ranks == 0 {
		switch {
		case c.Nodes > 1 && c.RanksPerNode > 0:
			c.Ranks = c.Nodes * c.RanksPerNode
		default:
			c.Ranks = runtime.NumCPU() * c.Nodes
		}
	}
	if c.Nodes > 1 && c.NodeID >= c.Nodes {
		return c, fmt.Errorf("gompj: node id %d outside [0,%d)", c.NodeID, c.Nodes)
	}
	if c.Bind != BindNone && c.Bind != BindCores {
		return c, fmt.Errorf("gompj: %s=%q: want %s or %s", env.Bind.Name, c.Bind, BindNone, BindCores)
	}
	if c.Dev != DevTCP && c.Dev != DevRDMA {
		return c, fmt.Errorf("gompj: unknown device %q (%s, -dev: tcp or rdma)", c.Dev, env.Dev.Name)
	}
	return c, nil
}

// Setting is one configuration value and where it came from, for `gompj info`.
type Setting struct {
	Variable, Value, Source string
}

// Effective reads the configuration this process would run with (environment, Slurm, defaults) and lists every
// variable of internal/env but the tests' with its value and source; a family lists each member that is set. The
// secret is never shown, only whether there is one.
func Effective() ([]Setting, error) {
	c, err := FromEnv(Config{})
	if err != nil {
		return nil, err
	}
	d, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	var out []Setting
	for _, v := range env.All() {
		switch {
		case v.Role == env.Test:
		case v.Family():
			members := v.Members(os.Environ())
			for _, m := range members {
				out = append(out, Setting{m[0], m[1], "env"})
			}
			if len(members) == 0 {
				out = append(out, Setting{v.Name, v.DefaultText(), "default"})
			}
		case v.Field != "":
			out = append(out, Setting{v.Name, v.Show(&d), c.Source(v.Name)})
		default:
			if val, ok := v.Get(os.LookupEnv); ok {
				out = append(out, Setting{v.Name, val, "env"})
			} else {
				out = append(out, Setting{v.Name, v.DefaultText(), "default"})
			}
		}
	}
	return out, nil
}
