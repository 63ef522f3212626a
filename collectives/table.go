package collectives

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gompj/gompj/internal/env"
	"github.com/gompj/gompj/ranks"
)

// The selection table. Each rule reads
//
//	<collective> <layout> <ranks> <bytes> <algorithm>
//
// layout is local (every member on this node), multi (members on several nodes) or *; ranks and bytes are
// inclusive ranges lo-hi, lo-* or * (bytes accept K, M, G suffixes, powers of 1024). bytes is the message size for
// bcast, reduce, allreduce, reduce_scatter and scan, the size of one rank's block for gather, scatter, allgather
// and alltoall, and 0 for the v variants and the neighbourhood collectives. For each call, the first rule that matches and whose algorithm applies
// (shm needs a local communicator, hier a multi-node one with several members on some node, ring and
// rabenseifner a commutative op) is taken; if none does, the collective's last-resort algorithm is.
//
// Overrides, highest priority first: Force on a communicator; GOMPJ_COLL_<COLLECTIVE>=<algorithm> (e.g.
// GOMPJ_COLL_ALLREDUCE=ring); rules in the file named by GOMPJ_COLL_TABLE (same format, '#' comments), which are
// tried before the built-in ones.
//
// Nonblocking and persistent collectives (package nbc) choose from the same table. Each collective also has a
// nonblocking name, its own with an i in front (iallreduce), with the same algorithms: a rule, a GOMPJ_COLL_I<NAME>
// variable or a Force for that name applies to the nonblocking and persistent calls only, and where none does they
// take the algorithm the blocking call would.

const defaultTable = `
barrier        local  *     *        shm
barrier        multi  *     *        hier
barrier        *      *     *        dissemination
bcast          local  *     *        shm
bcast          multi  *     *        hier
bcast          *      1-7   *        binomial
bcast          *      *     0-256K   binomial
bcast          *      *     *        scatter_allgather
reduce         local  *     *        shm
reduce         multi  *     *        hier
reduce         *      *     *        binomial
allreduce      local  *     *        shm
allreduce      multi  *     *        hier
allreduce      *      *     0-8K     recursive_doubling
allreduce      *      *     0-1M     rabenseifner
allreduce      *      *     *        ring
gather         local  *     *        shm
gather         multi  *     0-16K    hier
gather         *      *     0-8K     binomial
gather         *      *     *        linear
gatherv        local  *     *        shm
gatherv        *      *     *        linear
scatter        local  *     *        shm
scatter        multi  *     0-16K    hier
scatter        *      *     0-8K     binomial
scatter        *      *     *        linear
scatterv       local  *     *        shm
scatterv       *      *     *        linear
allgather      local  *     *        shm
allgather      multi  *     0-16K    hier
allgather      *      *     0-8K     recursive_doubling
allgather      *      *     *        ring
allgatherv     local  *     *        shm
allgatherv     *      *     *        ring
alltoall       local  *     *        shm
# across nodes the node-aware alltoall saves messages but copies every block twice more (to the leader and back
# out). It wins for small blocks over TCP with several ranks per node (np 8 on 2 nodes, 2 KiB: 119-122 against
# 342-435 us for linear); from 16 KiB blocks linear is as fast or faster everywhere (np 4 and 8 on 2 nodes, shared
# memory and TCP, 16 KiB-1 MiB: 0.3-1.0x the node-aware time; gompj bench alltoall with GOMPJ_COLL_ALLTOALL)
alltoall       multi  *     0-8K     hier
alltoall       *      *     0-1K     bruck
# linear has every peer's transfer in flight at once (a window of 32); pairwise steps wait for each exchange in
# turn (np 4 on 2 nodes, 64 KiB-1 MiB: 0.45-0.8x pairwise's time over shared memory, 0.55-0.85x over TCP)
alltoall       *      *     *        linear
alltoallv      local  *     *        shm
alltoallv      *      *     *        linear
reduce_scatter local  *     *        shm
reduce_scatter *      *     *        ring
scan           local  *     *        shm
scan           *      *     *        chain
exscan         local  *     *        shm
exscan         *      *     *        chain
# neighbourhood collectives on one node: shared memory, 2-3x faster than messages up to 8 KiB blocks and even at
# 128 KiB (gompj bench halo -np 4; BenchmarkHalo2D); the same whatever the size, so that members whose counts
# disagree still choose alike and get ErrTruncate, not a hang
neighbor_allgather  local  *  *     hybrid
neighbor_allgather  *      *  *     p2p
neighbor_allgatherv local  *  *     hybrid
neighbor_allgatherv *      *  *     p2p
neighbor_alltoall   local  *  *     hybrid
neighbor_alltoall   *      *  *     p2p
neighbor_alltoallv  local  *  *     hybrid
neighbor_alltoallv  *      *  *     p2p
`

// Collective ids index per-communicator caches.
const (
	collBarrier = iota
	collBcast
	collReduce
	collAllreduce
	collGather
	collGatherv
	collScatter
	collScatterv
	collAllgather
	collAllgatherv
	collAlltoall
	collAlltoallv
	collReduceScatter
	collScan
	collExscan
	collNeighborAllgather
	collNeighborAllgatherv
	collNeighborAlltoall
	collNeighborAlltoallv
	numBlocking
	numNonblocking = collExscan + 1               // the collectives that have nonblocking forms (package nbc)
	numColls       = numBlocking + numNonblocking // the blocking names, then the nonblocking ones in the same order
)

var collNames = func() (names [numColls]string) {
	copy(names[:], []string{"barrier", "bcast", "reduce", "allreduce", "gather", "gatherv", "scatter",
		"scatterv", "allgather", "allgatherv", "alltoall", "alltoallv", "reduce_scatter", "scan", "exscan",
		"neighbor_allgather", "neighbor_allgatherv", "neighbor_alltoall", "neighbor_alltoallv"})
	for i := 0; i < numNonblocking; i++ {
		names[numBlocking+i] = "i" + names[i]
	}
	return names
}()

// collID returns the id of the collective called name (-1 for none). The blocking calls name theirs by constant
// (chooseID): a search of collNames by string was 2 % of a small Iallreduce's node process, between 2 node
// processes, through the blocking Barrier of OSU's loop.
func collID(name string) int {
	if id, ok := collIndex[name]; ok {
		return id
	}
	return -1
}

var collIndex = func() map[string]int {
	m := make(map[string]int, numColls)
	for i, n := range collNames {
		m[n] = i
	}
	return m
}()

type lastChoice struct {
	valid       bool
	bytes       int
	commutative bool
	algo        string
}

// selCtx is what a choice depends on; every member computes the same one.
type selCtx struct {
	local, hier, commutative bool
	np, bytes                int
}

type applies func(selCtx) bool

func always(selCtx) bool         { return true }
func needLocal(s selCtx) bool    { return s.local }
func needHier(s selCtx) bool     { return s.hier }
func needComm(s selCtx) bool     { return s.commutative }
func needHierComm(s selCtx) bool { return s.hier && s.commutative }

// algorithms lists, per collective, its algorithms and when they apply.
var algorithms = map[string]map[string]applies{
	"barrier":        {"dissemination": always, "shm": needLocal, "hier": needHier},
	"bcast":          {"binomial": always, "linear": always, "scatter_allgather": always, "shm": needLocal, "hier": needHier},
	"reduce":         {"binomial": always, "shm": needLocal, "hier": needHierComm},
	"allreduce":      {"recursive_doubling": always, "rabenseifner": needComm, "ring": needComm, "reduce_bcast": always, "shm": needLocal, "hier": needHierComm},
	"gather":         {"linear": always, "binomial": always, "shm": needLocal, "hier": needHier},
	"gatherv":        {"linear": always, "shm": needLocal},
	"scatter":        {"linear": always, "binomial": always, "shm": needLocal, "hier": needHier},
	"scatterv":       {"linear": always, "shm": needLocal},
	"allgather":      {"ring": always, "recursive_doubling": always, "bruck": always, "shm": needLocal, "hier": needHier},
	"allgatherv":     {"ring": always, "shm": needLocal},
	"alltoall":       {"pairwise": always, "linear": always, "bruck": always, "shm": needLocal, "hier": needHier},
	"alltoallv":      {"pairwise": always, "linear": always, "shm": needLocal},
	"reduce_scatter": {"reduce_scatterv": always, "ring": needComm, "shm": needLocal},
	"scan":           {"chain": always, "shm": needLocal},
	"exscan":         {"chain": always, "shm": needLocal},
	// neighbourhood collectives: p2p = a message per edge; hybrid = shared memory with the neighbours on this
	// node, messages to the others (neighbor.go says why hybrid is the default on one node, p2p across nodes)
	"neighbor_allgather":  {"p2p": always, "hybrid": always},
	"neighbor_allgatherv": {"p2p": always, "hybrid": always},
	"neighbor_alltoall":   {"p2p": always, "hybrid": always},
	"neighbor_alltoallv":  {"p2p": always, "hybrid": always},
}

// lastResort names, per collective, the algorithm taken when no rule's algorithm applies to a call; it applies to
// every call (TestLastResortAlwaysApplies).
var lastResort = map[string]string{"barrier": "dissemination", "bcast": "binomial", "reduce": "binomial",
	"allreduce": "recursive_doubling", "gather": "linear", "gatherv": "linear", "scatter": "linear",
	"scatterv": "linear", "allgather": "ring", "allgatherv": "ring", "alltoall": "pairwise", "alltoallv": "pairwise",
	"reduce_scatter": "reduce_scatterv", "scan": "chain", "exscan": "chain", "neighbor_allgather": "p2p",
	"neighbor_allgatherv": "p2p", "neighbor_alltoall": "p2p", "neighbor_alltoallv": "p2p"}

// The nonblocking names have the algorithms of their blocking collective.
func init() {
	for _, c := range collNames[:numNonblocking] {
		algorithms["i"+c] = algorithms[c]
		lastResort["i"+c] = lastResort[c]
	}
}

// chooseNonblocking returns the algorithm of a nonblocking or persistent call of coll (a blocking name): what a
// Force, rule or variable of its nonblocking name says, else what the blocking call would take. As choose does, it
// reuses its previous choice for the same size (a program starts the same call over and over, and this lookup
// was a tenth of a small Iallreduce's own work), unless a Force of either name is in effect, which is looked at
// first on every call.
func (st *commState) chooseNonblocking(coll string, s selCtx) (string, error) {
	bid := collID(coll)
	if bid < 0 || bid >= numNonblocking {
		return "", fmt.Errorf("%w: %q has no nonblocking form", ranks.ErrInternal, coll)
	}
	id := numBlocking + bid
	icoll := collNames[id]
	if f := st.forced[id].Load(); f != nil && *f != "" && algorithms[icoll][*f](s) {
		return *f, nil
	}
	blockingForced := false
	if f := st.forced[bid].Load(); f != nil && *f != "" {
		blockingForced = true // choose decides on every call: the cache below would miss a change of it
	}
	if l := &st.last[id]; !blockingForced && l.valid && l.bytes == s.bytes && l.commutative == s.commutative {
		return l.algo, nil
	}
	if st.rules[id] == nil {
		all, err := loadTable()
		if err != nil {
			return "", err
		}
		mine := []rule{}
		for _, r := range all {
			if r.matches(icoll, selCtx{local: s.local, np: s.np, bytes: r.bytesLo}) {
				mine = append(mine, r)
			}
		}
		st.rules[id] = mine
	}
	algo := ""
	for _, r := range st.rules[id] {
		if s.bytes >= r.bytesLo && s.bytes <= r.bytesHi && algorithms[icoll][r.algo](s) {
			algo = r.algo
			break
		}
	}
	if algo == "" {
		var err error
		if algo, err = st.chooseID(bid, coll, s); err != nil {
			return "", err
		}
	}
	if !blockingForced {
		st.last[id] = lastChoice{valid: true, bytes: s.bytes, commutative: s.commutative, algo: algo}
	}
	return algo, nil
}

type rule struct {
	coll, layout     string
	npLo, npHi       int
	bytesLo, bytesHi int
	algo             string
	origin           string
}

func (r rule) matches(coll string, s selCtx) bool {
	if r.coll != coll {
		return false
	}
	switch r.layout {
	case "local":
		if !s.local {
			return false
		}
	case "multi":
		if s.local {
			return false
		}
	}
	return s.np >= r.npLo && s.np <= r.npHi && s.bytes >= r.bytesLo && s.bytes <= r.bytesHi
}

const unbounded = int(^uint(0) >> 1)

func parseRange(f string, size bool) (int, int, error) {
	if f == "*" {
		return 0, unbounded, nil
	}
	lo, hi, ok := strings.Cut(f, "-")
	if !ok {
		hi = lo
	}
	a, err := parseNum(lo, size)
	if err != nil {
		return 0, 0, err
	}
	b := unbounded
	if hi != "*" {
		if b, err = parseNum(hi, size); err != nil {
			return 0, 0, err
		}
	}
	if a > b {
		return 0, 0, fmt.Errorf("empty range %q", f)
	}
	return a, b, nil
}

func parseNum(s string, size bool) (int, error) {
	mult := 1
	if size && s != "" {
		switch s[len(s)-1] {
		case 'K', 'k':
			mult, s = 1<<10, s[:len(s)-1]
		case 'M', 'm':
			mult, s = 1<<20, s[:len(s)-1]
		case 'G', 'g':
			mult, s = 1<<30, s[:len(s)-1]
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > unbounded/mult {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return n * mult, nil
}

// parseTable parses rules in the table format; origin names them in errors and in Describe.
func parseTable(text, origin string) ([]rule, error) {
	var rules []rule
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		if i := strings.IndexByte(t, '#'); i >= 0 {
			t = t[:i]
		}
		f := strings.Fields(t)
		if len(f) == 0 {
			continue
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w: %s:%d: %s", ranks.ErrArg, origin, line, fmt.Sprintf(format, a...))
		}
		if len(f) != 5 {
			return nil, bad("want <collective> <layout> <ranks> <bytes> <algorithm>, got %q", t)
		}
		r := rule{coll: f[0], layout: f[1], algo: f[4], origin: origin}
		algos, ok := algorithms[r.coll]
		if !ok {
			return nil, bad("unknown collective %q", r.coll)
		}
		if _, ok := algos[r.algo]; !ok {
			return nil, bad("unknown %s algorithm %q (have %s)", r.coll, r.algo, algoList(r.coll))
		}
		if r.layout != "local" && r.layout != "multi" && r.layout != "*" {
			return nil, bad("layout %q is not local, multi or *", r.layout)
		}
		var err error
		if r.npLo, r.npHi, err = parseRange(f[2], false); err != nil {
			return nil, bad("ranks: %v", err)
		}
		if r.bytesLo, r.bytesHi, err = parseRange(f[3], true); err != nil {
			return nil, bad("bytes: %v", err)
		}
		rules = append(rules, r)
	}
	if err := sc.Err(); err != nil { // a line too long to scan: the rest of the table would be lost unsaid
		return nil, fmt.Errorf("%w: %s:%d: %v", ranks.ErrArg, origin, line+1, err)
	}
	return rules, nil
}

func algoList(coll string) string {
	var names []string
	for a := range algorithms[coll] {
		names = append(names, a)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

var (
	tableOnce sync.Once
	table     []rule
	tableErr  error
)

// loadTable builds the process's table once: environment overrides, then the GOMPJ_COLL_TABLE file, then the
// defaults.
func loadTable() ([]rule, error) {
	tableOnce.Do(func() { table, tableErr = buildTable(os.Getenv, os.ReadFile) })
	return table, tableErr
}

func buildTable(getenv func(string) string, readFile func(string) ([]byte, error)) ([]rule, error) {
	var rules []rule
	for _, c := range Collectives() {
		name := env.CollAlgorithm.Member(strings.ToUpper(c))
		if v := strings.TrimSpace(getenv(name)); v != "" {
			r, err := parseTable(fmt.Sprintf("%s * * * %s", c, v), name)
			if err != nil {
				return nil, err
			}
			rules = append(rules, r...)
		}
	}
	for _, c := range NonblockingCollectives() {
		name := env.CollNonblocking.Member(strings.ToUpper(c))
		if v := strings.TrimSpace(getenv(name)); v != "" {
			r, err := parseTable(fmt.Sprintf("i%s * * * %s", c, v), name)
			if err != nil {
				return nil, err
			}
			rules = append(rules, r...)
		}
	}
	if path := strings.TrimSpace(getenv(env.CollTable.Name)); path != "" {
		b, err := readFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ranks.ErrArg, env.CollTable.Name, err)
		}
		r, err := parseTable(string(b), path)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r...)
	}
	d, err := parseTable(defaultTable, "default")
	if err != nil {
		panic(err) // the built-in table is part of the program
	}
	return append(rules, d...), nil
}

// choose returns the algorithm for one call. The rules that can match the communicator are filtered once; the
// previous choice is reused for the same message size.
func (st *commState) choose(coll string, s selCtx) (string, error) {
	return st.chooseID(collID(coll), coll, s)
}

// chooseID is choose of the collective whose collID is id: for calls that know it, which spares the search.
func (st *commState) chooseID(id int, coll string, s selCtx) (string, error) {
	if f := st.forced[id].Load(); f != nil && *f != "" && algorithms[coll][*f](s) {
		return *f, nil
	}
	if l := &st.last[id]; l.valid && l.bytes == s.bytes && l.commutative == s.commutative {
		return l.algo, nil
	}
	if st.rules[id] == nil {
		all, err := loadTable()
		if err != nil {
			return "", err
		}
		mine := []rule{}
		for _, r := range all {
			if r.matches(coll, selCtx{local: s.local, np: s.np, bytes: r.bytesLo}) {
				mine = append(mine, r)
			}
		}
		st.rules[id] = mine
	}
	algo := lastResort[coll]
	for _, r := range st.rules[id] {
		if s.bytes >= r.bytesLo && s.bytes <= r.bytesHi && algorithms[coll][r.algo](s) {
			algo = r.algo
			break
		}
	}
	st.last[id] = lastChoice{valid: true, bytes: s.bytes, commutative: s.commutative, algo: algo}
	return algo, nil
}

func (st *commState) sel(commutative bool, bytes int) selCtx {
	return selCtx{local: st.local, hier: st.hierOK(), commutative: commutative, np: st.size, bytes: bytes}
}

// Force makes every later call of collective coll on c (on this rank) use algorithm algo, when it applies to the
// call (otherwise the table decides); "" removes the forcing. Every member must force alike. For benchmarks and
// tests. On an intercommunicator it forces the algorithms of the local phases (inter.go).
func Force(c *ranks.Comm, coll, algo string) error {
	if err := c.Check(); err != nil { // a nil communicator reached stateOf, a panic
		return err
	}
	if c.IsInter() {
		c = c.Local()
	}
	algos, ok := algorithms[coll]
	if !ok {
		return fmt.Errorf("%w: unknown collective %q", ranks.ErrArg, coll)
	}
	if _, ok := algos[algo]; !ok && algo != "" {
		return fmt.Errorf("%w: unknown %s algorithm %q (have %s)", ranks.ErrArg, coll, algo, algoList(coll))
	}
	st := stateOf(c)
	st.forced[collID(coll)].Store(&algo)
	st.forces.Add(1)
	return nil
}

// Forces counts the Force calls on c so far (this rank's): a choice of algorithm remembered from one call to the
// next holds while it does not change.
func Forces(c *ranks.Comm) uint32 { return stateOf(c).forces.Load() }

// Collectives lists the collectives the table knows, and Algorithms a collective's algorithms.
func Collectives() []string {
	cs := slices.Clone(collNames[:numBlocking])
	sort.Strings(cs)
	return cs
}

// NonblockingCollectives lists the collectives that have nonblocking and persistent forms (package nbc), by their
// blocking names: the table knows each also as "i" + its name, with the same algorithms.
func NonblockingCollectives() []string {
	cs := slices.Clone(collNames[:numNonblocking])
	sort.Strings(cs)
	return cs
}

func Algorithms(coll string) []string {
	var as []string
	for a := range algorithms[coll] {
		as = append(as, a)
	}
	sort.Strings(as)
	return as
}

// Describe returns the selection table in force (overrides first), for `gompj info`.
func Describe() string {
	var b strings.Builder
	rules, err := loadTable()
	b.WriteString("Collective algorithm selection (first matching rule that applies wins):\n")
	if err != nil {
		fmt.Fprintf(&b, "  error in the overrides: %v (defaults only)\n", err)
		rules, _ = parseTable(defaultTable, "default")
	}
	fmtRange := func(lo, hi int, size bool) string {
		if lo == 0 && hi == unbounded {
			return "*"
		}
		s := func(n int) string {
			if !size {
				return strconv.Itoa(n)
			}
			switch {
			case n >= 1<<30 && n%(1<<30) == 0:
				return fmt.Sprintf("%dG", n>>30)
			case n >= 1<<20 && n%(1<<20) == 0:
				return fmt.Sprintf("%dM", n>>20)
			case n >= 1<<10 && n%(1<<10) == 0:
				return fmt.Sprintf("%dK", n>>10)
			}
			return strconv.Itoa(n)
		}
		if hi == unbounded {
			return s(lo) + "-*"
		}
		return s(lo) + "-" + s(hi)
	}
	fmt.Fprintf(&b, "  %-19s %-6s %-7s %-10s %-19s %s\n", "collective", "layout", "ranks", "bytes", "algorithm", "from")
	for _, r := range rules {
		fmt.Fprintf(&b, "  %-19s %-6s %-7s %-10s %-19s %s\n", r.coll, r.layout, fmtRange(r.npLo, r.npHi, false),
			fmtRange(r.bytesLo, r.bytesHi, true), r.algo, r.origin)
	}
	b.WriteString("Algorithms (the nonblocking name, i<collective>, has its collective's):\n")
	for _, c := range collNames[:numBlocking] {
		fmt.Fprintf(&b, "  %-19s %s (last resort: %s)\n", c, strings.Join(Algorithms(c), ", "), lastResort[c])
	}
	b.WriteString("Nonblocking and persistent calls (icollective) take the blocking choice unless a rule names them\n")
	b.WriteString("Override: GOMPJ_COLL_<COLLECTIVE>=<algorithm>, GOMPJ_COLL_I<COLLECTIVE>=<algorithm> (nonblocking),\n")
	b.WriteString("  or GOMPJ_COLL_TABLE=<file of rules>\n")
	b.WriteString("  rule: <collective> <local|multi|*> <ranks lo-hi|*> <bytes lo-hi|*> <algorithm>\n")
	return b.String()
}
