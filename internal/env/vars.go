package env

// Every GOMPJ_* variable, in the order `gompj help env` and `gompj info` list them. To add one, add an entry here
// (and, if it configures a job, the node.Config field it names); read it through the entry, never by spelling its
// name again.

// One box.
var (
	NP = def(Var{Name: "GOMPJ_NP", Field: "Ranks", Kind: Int, Role: Identity, Job: true, Group: OneBox,
		Default: "the number of CPUs; on several nodes, CPUs per node × nodes",
		Meaning: "number of ranks in the job"})
	EagerLimit = def(Var{Name: "GOMPJ_EAGER_LIMIT", Field: "EagerLimit", Kind: Int, Value: "65536", Group: OneBox,
		Meaning: "intra-node protocol switch in bytes: larger messages go rendezvous"})
	Pin = def(Var{Name: "GOMPJ_PIN", Field: "Pin", Kind: Bool, Value: "0", Group: OneBox,
		Meaning: "1 pins each rank's goroutine to a core (Linux)"})
	Spin = def(Var{Name: "GOMPJ_SPIN", Field: "SpinTime", Kind: DurationOff, Group: OneBox,
		Default: "50us when the host's ranks <= cores, else 0",
		Meaning: "how long a waiting rank spins before yielding, a Go duration (0: never)"})
	Yields = def(Var{Name: "GOMPJ_YIELDS", Field: "Yields", Kind: Int, Group: OneBox,
		Default: "50, or 10 when ranks > cores, or 3000 when only the host's node processes together have more (no more processes than cores)",
		Meaning: "how often a waiting rank yields before it parks"})
	UnexpectedLimit = def(Var{Name: "GOMPJ_UNEXPECTED_LIMIT", Field: "UnexpectedLimit", Kind: Int, Value: "67108864",
		Job: true, Group: OneBox,
		Meaning: "unexpected eager bytes a node holds before senders switch to rendezvous: from the network, " +
			"split over the peer nodes; from its own ranks, split over them, at least 262144 per receiving rank"})
	UnexpectedShare = def(Var{Name: "GOMPJ_UNEXPECTED_SHARE", Field: "UnexpectedShare", Kind: Int, Group: OneBox,
		Default: "GOMPJ_UNEXPECTED_LIMIT divided among the node's ranks, at least 262144",
		Meaning: "unexpected eager bytes each rank holds from ranks of its own node, exactly, with no lower bound " +
			"(tests set a few KiB)"})
)

// Multi-node jobs.
var (
	Nodes = def(Var{Name: "GOMPJ_NODES", Field: "Nodes", Kind: Int, Value: "1", Role: Identity, Job: true,
		Group: MultiNode, Meaning: "number of node processes in the job (1: this box only)"})
	NodeID = def(Var{Name: "GOMPJ_NODE_ID", Field: "NodeID", Kind: Int, Role: Identity, Group: MultiNode,
		Default: "0", Meaning: "this process's node id, 0 .. GOMPJ_NODES-1"})
	RanksPerNode = def(Var{Name: "GOMPJ_RANKS_PER_NODE", Field: "RanksPerNode", Kind: Int, Role: Identity, Job: true,
		Group: MultiNode, Default: "even blocks, the remainder to the first nodes",
		Meaning: "ranks per node: node i hosts ranks i*K .. i*K+K-1"})
	Coordinator = def(Var{Name: "GOMPJ_COORDINATOR", Field: "Coordinator", Kind: String, Role: Identity, Job: true,
		Group: MultiNode, Default: "none", Meaning: "host:port of the job's bootstrap coordinator"})
	CoordinatorServe = def(Var{Name: "GOMPJ_COORDINATOR_SERVE", Field: "ServeCoordinator", Kind: Bool, Value: "0",
		Role: Identity, Group: MultiNode,
		Meaning: "1: node 0 runs the coordinator itself on GOMPJ_COORDINATOR (Slurm task 0 does)"})
	Secret = def(Var{Name: "GOMPJ_SECRET", Field: "Secret", Kind: Hidden, Role: Identity, Job: true, Group: MultiNode,
		Default: "none (under Slurm: derived from the key file)",
		Meaning: "the job secret, at least 16 bytes, proved by every connection (never put it on a command line)"})
	SecretStdin = def(Var{Name: "GOMPJ_SECRET_STDIN", Kind: Bool, Value: "0", Role: Identity, Group: MultiNode,
		Meaning: "1: read the job secret from the first line of standard input (`gompj run -hosts` over ssh)"})
	Listen = def(Var{Name: "GOMPJ_LISTEN", Field: "Listen", Kind: String, Role: Host, Group: MultiNode,
		Default: "the local address that routes to the coordinator",
		Meaning: "this node's network listen address, host or host:port"})
	NetEagerLimit = def(Var{Name: "GOMPJ_NET_EAGER_LIMIT", Field: "NetEagerLimit", Kind: Int, Value: "131072",
		Job: true, Group: MultiNode, Meaning: "network protocol switch in bytes: larger messages go rendezvous"})
	Stripes = def(Var{Name: "GOMPJ_STRIPES", Field: "Stripes", Kind: Int, Value: "1", Job: true, Group: MultiNode,
		Meaning: "TCP connections per pair of nodes"})
	Lazy = def(Var{Name: "GOMPJ_LAZY", Field: "Lazy", Kind: Bool, Value: "0", Group: MultiNode,
		Meaning: "1 connects to a node on the first message for it, not at start"})
	Bind = def(Var{Name: "GOMPJ_BIND", Field: "Bind", Kind: String, Value: "none", Group: MultiNode,
		Meaning: "cores: the node processes that share a host split the CPUs they may run on, each bound (all its " +
			"threads) to its own equal part, GOMAXPROCS its size, as mpirun --bind-to core binds Open MPI's; none: " +
			"the kernel places threads anywhere (on 2 vCPUs, bound, latency, pure times and NPB were as fast or " +
			"faster and 96 % of a 1 MiB nonblocking collective hid behind idle computation, but none behind busy " +
			"computation: a computing rank held its process's only processor)"})
	TCPCongestion = def(Var{Name: "GOMPJ_TCP_CC", Field: "TCPCongestion", Kind: String, Value: "auto",
		Group: MultiNode,
		Meaning: "TCP congestion control of the tcp device's connections: auto (Reno between node processes of one " +
			"host, where the kernel's pacing only delays the copies; the kernel's default to other hosts), system " +
			"(the kernel's default everywhere), or an algorithm for every connection, e.g. cubic " +
			"(net.ipv4.tcp_allowed_congestion_control lists those an unprivileged process may choose)"})
	NetSpin = def(Var{Name: "GOMPJ_NET_SPIN", Field: "NetSpin", Kind: DurationOff, Group: MultiNode,
		Default: "1ms when the host's ranks <= cores, else 0",
		Meaning: "how long a rank waiting on the network polls the device itself before it parks, a Go duration"})
	BusyPoll = def(Var{Name: "GOMPJ_BUSY_POLL", Field: "BusyPoll", Kind: DurationOff, Group: MultiNode,
		Default: "50us; 0 when the host's ranks > cores",
		Meaning: "how long a device's progress loop polls before sleeping, when no rank drives it (0: off)"})
	Dev = def(Var{Name: "GOMPJ_DEV", Field: "Dev", Kind: String, Value: "tcp", Job: true, Group: MultiNode,
		Meaning: "device between node processes on different hosts: tcp, or rdma (libfabric; a build with -tags ofi); " +
			"also `gompj run -dev`"})
	HostSHM = def(Var{Name: "GOMPJ_HOST_SHM", Field: "NoHostSHM", Not: true, Kind: Bool, Value: "1", Job: true,
		Group: MultiNode, Meaning: "0: node processes on the same host talk through GOMPJ_DEV instead of shared memory"})
	CMA = def(Var{Name: "GOMPJ_CMA", Field: "NoCMA", Not: true, Kind: Bool, Value: "1", Group: MultiNode,
		Meaning: "0: node processes on the same host copy large messages through their shared rings instead of " +
			"one process_vm_readv/writev copy (CMA), as they do where the kernel refuses CMA"})
	RegCacheBytes = def(Var{Name: "GOMPJ_REGCACHE_BYTES", Field: "RegCacheBytes", Kind: Int, Value: "1073741824",
		Group: MultiNode,
		Meaning: "bytes the rdma devices (shm, rdma) keep registered in their pin-down cache of transfer buffers; " +
			"past it the least recently used idle registrations go (those of transfers under way never do)"})
	Timeout = def(Var{Name: "GOMPJ_TIMEOUT", Field: "Timeout", Kind: Duration, Value: "30s", Group: MultiNode,
		Meaning: "bootstrap timeout (registration, connections, start barrier), a Go duration; also `gompj run -timeout`"})
)

// Slurm (srun starts the node processes; no launcher).
var (
	Port = def(Var{Name: "GOMPJ_PORT", Kind: Int, Job: true, Group: Slurm,
		Default: "12000 + (7*SLURM_JOB_ID + SLURM_STEP_ID) mod 18000",
		Meaning: "the coordinator's port"})
	NoSlurm = def(Var{Name: "GOMPJ_NO_SLURM", Kind: Bool, Value: "0", Job: true, Group: Slurm,
		Meaning: "1 ignores the SLURM_* variables"})
	KeyFile = def(Var{Name: "GOMPJ_KEY_FILE", Kind: String, Role: Host, Group: Slurm, Default: "~/.gompj/key",
		Meaning: "the key the job secret is derived from when GOMPJ_SECRET is unset (same on every node, mode 0600)"})
)

// Collectives.
var (
	CollTable = def(Var{Name: "GOMPJ_COLL_TABLE", Kind: String, Job: true, Group: Collectives, Default: "none",
		Meaning: "file of collective selection rules tried before the built-in table, one a line: " +
			"<collective> <local|multi|*> <ranks lo-hi|*> <bytes lo-hi|*> <algorithm> ('#' comments; bytes take " +
			"K, M, G; `gompj info` prints the table in force)"})
	CollAlgorithm = def(Var{Name: "GOMPJ_COLL_<NAME>", Kind: String, Job: true, Group: Collectives,
		Default: "the table's choice",
		Meaning: "algorithm for collective NAME wherever it applies, e.g. GOMPJ_COLL_ALLREDUCE=ring"})
	CollNonblocking = def(Var{Name: "GOMPJ_COLL_I<NAME>", Kind: String, Job: true, Group: Collectives,
		Default: "the blocking collective's choice",
		Meaning: "algorithm for the nonblocking and persistent calls of collective NAME (Iallreduce, AllreduceInit) " +
			"wherever it applies, one of NAME's, e.g. GOMPJ_COLL_IALLREDUCE=ring"})
	NbcSlots = def(Var{Name: "GOMPJ_NBC_SLOTS", Field: "NbcSlots", Kind: Int, Value: "16", Group: Collectives,
		Meaning: "shared-memory slots per communicator for nonblocking collectives; more outstanding ones queue"})
	Workers = def(Var{Name: "GOMPJ_WORKERS", Field: "Workers", Kind: Int, Group: Collectives,
		Default: "GOMAXPROCS",
		Meaning: "goroutines of the node's worker pool, which moves nonblocking collectives on while ranks compute"})
	AsyncProgress = def(Var{Name: "GOMPJ_ASYNC_PROGRESS", Field: "NoAsyncProgress", Not: true, Kind: Bool,
		Value: "1", Group: Collectives,
		Meaning: "0 turns the worker pool off: nonblocking collectives then move on only in the calls that start, " +
			"test and wait for them"})
	Overlap = def(Var{Name: "GOMPJ_OVERLAP", Field: "Overlap", Kind: Bool, Value: "0", Group: Collectives,
		Meaning: "1 favours overlap over the time of a start and its wait: GOMAXPROCS gets one more processor, on " +
			"which the progress loop and the workers run while every rank computes, and a nonblocking collective " +
			"that crosses node processes is started by a worker, its starting call returning at once"})
	CallCheck = def(Var{Name: "GOMPJ_CALL_CHECK", Field: "CallCheck", Kind: DurationOff, Value: "1s",
		Group: Collectives,
		Meaning: "how often a node process compares its ranks' latest collective calls on communicators that span " +
			"nodes with the other members' (0: never): members that disagree about a root, or about which " +
			"collective comes next, end the job with ErrArg instead of hanging"})
)

// The gompj command.
var (
	SSH = def(Var{Name: "GOMPJ_SSH", Kind: String, Value: "ssh", Role: Launcher, Group: Command,
		Meaning: "ssh command and options used by `gompj run -hosts`, e.g. \"ssh -p 2222 -i key\""})
)

// gompj's own tests.
var (
	HarnessJob = def(Var{Name: "GOMPJ_HARNESS_JOB", Kind: String, Role: Test, Group: Tests,
		Meaning: "internal/harness: the (sub)test a node process runs"})
	HarnessNode = def(Var{Name: "GOMPJ_HARNESS_NODE", Kind: Int, Role: Test, Group: Tests,
		Meaning: "internal/harness: the node process's id, for messages"})
	NetdevChild = def(Var{Name: "GOMPJ_NETDEV_CHILD", Kind: String, Role: Test, Group: Tests,
		Meaning: "netdev's fault tests: the address a child process connects to"})
	TestSeed = def(Var{Name: "GOMPJ_TEST_SEED", Kind: Int, Role: Test, Group: Tests,
		Meaning: "randomised tests that log their seed (TestCallsLookModel): replay that seed"})
)
