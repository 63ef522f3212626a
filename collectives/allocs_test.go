package collectives

import (
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// Steady-state allocations of the blocking collectives: every collective, with every algorithm it can be forced
// to, for primitive slices of a few sizes (one element, inline, staged, chunked, and above the 64 KiB eager
// limit), in place and not, at two roots, with a commutative and a non-commutative op, on one node and on two
// (faked) nodes for the node-aware algorithms. After warm-up calls (first-use set-up, scratch growth), a call must
// allocate nothing: the test fails on any allocation made by this package's code during the measured calls.
//
// How it measures. All ranks are goroutines of this process, so the measurement is process-wide, over every
// rank's calls. testing.AllocsPerRun would time one goroutine's loop while the other ranks run unsynchronised with
// its window (and it changes GOMAXPROCS under running ranks). Here every rank makes the same calls between two
// barriers on the world communicator, at which rank 0 opens and closes the window while the others wait, so that
// their calls, and nothing else they do, lie inside it.
//
// The process-wide count of allocations (MemStats.Mallocs) is not a usable pass/fail figure: it includes what
// ranks and the runtime allocate on their own schedule (request chunks for Isend/Irecv, message payload buffers
// and wakers from sync.Pools, which drain on one processor and fill on another, the runtime's sudog caches, emptied
// by every garbage collection). So the memory profiler records every allocation during the test
// (runtime.MemProfileRate = 1), a window is opened and closed by a garbage collection (which publishes the profile
// up to it) and a look at the profile, and the test counts the window's allocations whose site (the first frame
// outside package runtime) is in this package's non-test code: what collectives itself allocates, exactly and
// whatever the scheduling. Before that window, three windows of MemStats readings give the process-wide figure
// (the best of three), logged with -v for information. Buffers passed as any are boxed once, before the loop, so
// that this test counts the collectives' own allocations; that boxing at each call costs nothing either (the
// arguments do not escape: hideArg) is the root package's TestCollectiveArgumentsNotBoxed.
var allocsCase = flag.String("allocs.case", "", "TestSteadyStateAllocs: only the cases whose name matches this regexp")

func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const np, warm, trials = 4, 20, 3
	calls := 30
	if testing.Short() {
		calls = 10
	}
	rate := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	t.Cleanup(func() { runtime.MemProfileRate = rate })
	layouts := []struct {
		name   string
		nodeOf func(w int) int // nil: every rank on this node
		inter  bool            // the communicator under test is an intercommunicator (inter_test.go)
	}{
		{"local", nil, false},
		{"rr2", func(w int) int { return w % 2 }, false},     // two nodes, members not contiguous in rank order
		{"blocks2", func(w int) int { return w / 2 }, false}, // two nodes of consecutive ranks
		{"inter", nil, true},
	}
	for _, lay := range layouts {
		t.Run(lay.name, func(t *testing.T) {
			cases := allocCases(np, lay.nodeOf != nil)
			if lay.inter {
				cases = interAllocCases()
			}
			if *allocsCase != "" {
				re := regexp.MustCompile(*allocsCase)
				var sel []allocCase
				for _, tc := range cases {
					if re.MatchString(tc.name) {
						sel = append(sel, tc)
					}
				}
				cases = sel
			}
			// the profile must see allocations in a window: one per call and rank at a site of this file
			cases = append([]allocCase{{name: "self-check", mk: func(*ranks.Comm) func() error {
				return func() error { allocSink = allocSelfCheck(); return nil }
			}}}, cases...)
			type result struct {
				total float64          // process-wide allocations per call, best window
				own   map[string]int64 // allocations at this package's sites, by site, over all windows
				check int64            // the self-check's allocations
			}
			results := make([]result, len(cases))
			err := node.Run(node.Config{Ranks: np}, func(w *ranks.Comm) error {
				c, err := w.Dup() // the communicator under test; w synchronises the measurement
				if err != nil {
					return err
				}
				if lay.nodeOf != nil {
					setLayout(c, lay.nodeOf)
				}
				if lay.inter {
					if c, err = interUnderTest(c); err != nil {
						return err
					}
				}
				var m0, m1 runtime.MemStats
				prev, now := map[string]int64{}, map[string]int64{}
				for i, tc := range cases {
					if tc.coll != "" {
						if err := Force(c, tc.coll, tc.algo); err != nil {
							return err
						}
					}
					call := tc.mk(c)
					for k := 0; k < warm; k++ {
						if err := call(); err != nil {
							return fmt.Errorf("%s: %w", tc.name, err)
						}
					}
					best := math.Inf(1)
					for trial := 0; trial < trials; trial++ {
						if err := onRank0(w, func() { runtime.ReadMemStats(&m0) }); err != nil {
							return err
						}
						for k := 0; k < calls; k++ {
							if err := call(); err != nil {
								return fmt.Errorf("%s: %w", tc.name, err)
							}
						}
						if err := onRank0(w, func() {
							runtime.ReadMemStats(&m1)
							best = min(best, float64(m1.Mallocs-m0.Mallocs)/float64(calls))
						}); err != nil {
							return err
						}
					}
					if err := onRank0(w, func() {
						runtime.GC() // publishes the profile of the allocations before it
						profileSites(prev)
					}); err != nil {
						return err
					}
					for k := 0; k < trials*calls; k++ {
						if err := call(); err != nil {
							return fmt.Errorf("%s: %w", tc.name, err)
						}
					}
					if err := onRank0(w, func() {
						runtime.GC()
						profileSites(now)
						r := result{total: best, own: map[string]int64{}}
						for site, n := range now {
							if d := n - prev[site]; d > 0 {
								if strings.Contains(site, "allocSelfCheck") {
									r.check += d
								} else if site[0] == '+' {
									r.own[site[1:]] += d
								}
							}
						}
						results[i] = r
					}); err != nil {
						return err
					}
					if tc.coll != "" {
						if err := Force(c, tc.coll, ""); err != nil {
							return err
						}
					}
				}
				return c.Free()
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(np * trials * calls); results[0].check != want {
				t.Fatalf("the memory profile saw %d allocations of the self-check, want %d", results[0].check, want)
			}
			for i, tc := range cases[1:] {
				r := results[i+1]
				var own int64
				var sites []string
				for site, n := range r.own {
					own += n
					sites = append(sites, fmt.Sprintf("%d at %s", n, site))
				}
				sort.Strings(sites)
				perCall := float64(own) / float64(trials*calls)
				if own > 0 {
					t.Errorf("%s: %.2f allocations per call by collectives (all ranks): %s", tc.name, perCall,
						strings.Join(sites, "; "))
				} else if testing.Verbose() {
					t.Logf("%-55s by collectives %.2f, process-wide %.2f", tc.name, perCall, r.total)
				}
			}
		})
	}
}

var allocSink []byte

//go:noinline
func allocSelfCheck() []byte { return make([]byte, 64) } // not a tiny allocation: those are profiled by block

// onRank0 runs f on rank 0 of w between two barriers: nobody else does anything meanwhile.
func onRank0(w *ranks.Comm, f func()) error {
	if err := Barrier(w); err != nil {
		return err
	}
	if w.Rank() == 0 {
		f()
	}
	return Barrier(w)
}

// profileSites sets sites to the memory profile's allocation counts by site: the first frame outside package
// runtime, as "function file:line", with a '+' in front for this package's non-test code. (Its memory is reused:
// with every allocation profiled, allocating is slow.)
func profileSites(sites map[string]int64) {
	n, ok := runtime.MemProfile(profRecs, true)
	for !ok {
		profRecs = make([]runtime.MemProfileRecord, n+n/4)
		n, ok = runtime.MemProfile(profRecs, true)
	}
	clear(sites)
	for i := range profRecs[:n] {
		r := &profRecs[i]
		site, ok := siteOf[r.Stack0]
		if !ok {
			frames := runtime.CallersFrames(r.Stack())
			for {
				f, more := frames.Next()
				if !strings.HasPrefix(f.Function, "runtime.") {
					site = fmt.Sprintf("%s %s:%d", f.Function, filepath.Base(f.File), f.Line)
					if strings.HasPrefix(f.Function, "github.com/gompj/gompj/collectives.") && !strings.HasSuffix(f.File, "_test.go") {
						site = "+" + site
					}
					break
				}
				if !more {
					site = "runtime"
					break
				}
			}
			siteOf[r.Stack0] = site
		}
		sites[site] += r.AllocObjects
	}
}

// profileSites' memory (used by rank 0 only)
var (
	profRecs []runtime.MemProfileRecord
	siteOf   = map[[32]uintptr]string{}
)

// allocCase is one call shape. mk runs on every rank and returns the call to repeat, its buffers made and boxed.
type allocCase struct {
	name, coll, algo string
	mk               func(c *ranks.Comm) func() error
}

func allocCases(np int, multi bool) []allocCase {
	var cases []allocCase
	sizes := []int{1, 100, 1000, 5000, 9000} // float64 elements: 8 B, 800 B, 8000 B, 40 KB, 72 KB
	userSum := NewOp(func(in, inout []float64) {
		for i := range inout {
			inout[i] += in[i]
		}
	}, false)
	fill := func(s []float64, base int) []float64 {
		for i := range s {
			s[i] = float64(base + i%7)
		}
		return s
	}
	add := func(coll, variant string, n int, mk func(c *ranks.Comm) func() error) {
		algos := Algorithms(coll)
		for _, algo := range algos {
			switch {
			case algo == "shm" && multi, algo == "hier" && !multi:
				continue // does not apply: the table would pick another algorithm
			case multi && algo != "hier":
				continue // the flat algorithms are measured on the local layout
			}
			name := fmt.Sprintf("%s/%s/%s/n=%d", coll, algo, variant, n)
			cases = append(cases, allocCase{name: name, coll: coll, algo: algo, mk: mk})
		}
	}
	add("barrier", "", 0, func(c *ranks.Comm) func() error { return func() error { return Barrier(c) } })
	for _, n := range sizes {
		for _, root := range []int{0, np - 1} {
			v := fmt.Sprintf("root%d", root)
			add("bcast", v, n, func(c *ranks.Comm) func() error {
				var buf any = fill(make([]float64, n), root)
				return func() error { return Bcast(c, buf, root) }
			})
			add("reduce", v, n, func(c *ranks.Comm) func() error {
				var send, recv any = fill(make([]float64, n), c.Rank()), make([]float64, n)
				return func() error { return Reduce(c, send, recv, Sum, root) }
			})
			add("reduce", v+"/inplace", n, func(c *ranks.Comm) func() error {
				var send, recv any = fill(make([]float64, n), c.Rank()), make([]float64, n)
				if c.Rank() == root {
					send = InPlace
				}
				return func() error { return Reduce(c, send, recv, Sum, root) }
			})
			add("reduce", v+"/noncommutative", n, func(c *ranks.Comm) func() error {
				var send, recv any = fill(make([]float64, n), c.Rank()), make([]float64, n)
				return func() error { return Reduce(c, send, recv, userSum, root) }
			})
			add("gather", v, n, func(c *ranks.Comm) func() error {
				var send, recv any = fill(make([]float64, n), c.Rank()), make([]float64, n*np)
				return func() error { return Gather(c, send, recv, root) }
			})
			add("gather", v+"/inplace", n, func(c *ranks.Comm) func() error {
				var send, recv any = fill(make([]float64, n), c.Rank()), make([]float64, n*np)
				if c.Rank() == root {
					send = InPlace
				}
				return func() error { return Gather(c, send, recv, root) }
			})
			add("scatter", v, n, func(c *ranks.Comm) func() error {
				var send, recv any = fill(make([]float64, n*np), c.Rank()), make([]float64, n)
				return func() error { return Scatter(c, send, recv, root) }
			})
			add("scatter", v+"/inplace", n, func(c *ranks.Comm) func() error {
				var send, recv any = fill(make([]float64, n*np), c.Rank()), make([]float64, n)
				if c.Rank() == root {
					recv = InPlace
				}
				return func() error { return Scatter(c, send, recv, root) }
			})
			// v variants: rank r has n+r elements, displacements leave a gap of one
			vcounts := func() (counts, displs []int, total int) {
				counts, displs = make([]int, np), make([]int, np)
				for r := range counts {
					counts[r], displs[r] = n+r, total
					total += n + r + 1
				}
				return
			}
			add("gatherv", v, n, func(c *ranks.Comm) func() error {
				counts, displs, total := vcounts()
				var send, recv any = fill(make([]float64, n+c.Rank()), c.Rank()), make([]float64, total)
				return func() error { return Gatherv(c, send, recv, counts, displs, root) }
			})
			add("scatterv", v, n, func(c *ranks.Comm) func() error {
				counts, displs, total := vcounts()
				var send, recv any = fill(make([]float64, total), c.Rank()), make([]float64, n+c.Rank())
				return func() error { return Scatterv(c, send, counts, displs, recv, root) }
			})
		}
		add("allreduce", "", n, func(c *ranks.Comm) func() error {
			var send, recv any = fill(make([]float64, n), c.Rank()), make([]float64, n)
			return func() error { return Allreduce(c, send, recv, Sum) }
		})
		add("allreduce", "inplace", n, func(c *ranks.Comm) func() error {
			var recv any = fill(make([]float64, n), c.Rank())
			return func() error { return Allreduce(c, InPlace, recv, Max) }
		})
		add("allreduce", "noncommutative", n, func(c *ranks.Comm) func() error {
			var send, recv any = fill(make([]float64, n), c.Rank()), make([]float64, n)
			return func() error { return Allreduce(c, send, recv, userSum) }
		})
		add("allgather", "", n, func(c *ranks.Comm) func() error {
			var send, recv any = fill(make([]float64, n), c.Rank()), make([]float64, n*np)
			return func() error { return Allgather(c, send, recv) }
		})
		add("allgather", "inplace", n, func(c *ranks.Comm) func() error {
			var recv any = fill(make([]float64, n*np), c.Rank())
			return func() error { return Allgather(c, InPlace, recv) }
		})
		add("allgatherv", "", n, func(c *ranks.Comm) func() error {
			counts, displs := make([]int, np), make([]int, np)
			total := 0
			for r := range counts {
				counts[r], displs[r] = n+r, total
				total += n + r + 1
			}
			var send, recv any = fill(make([]float64, n+c.Rank()), c.Rank()), make([]float64, total)
			return func() error { return Allgatherv(c, send, recv, counts, displs) }
		})
		add("alltoall", "", n, func(c *ranks.Comm) func() error {
			var send, recv any = fill(make([]float64, n*np), c.Rank()), make([]float64, n*np)
			return func() error { return Alltoall(c, send, recv) }
		})
		add("alltoall", "inplace", n, func(c *ranks.Comm) func() error {
			var recv any = fill(make([]float64, n*np), c.Rank())
			return func() error { return Alltoall(c, InPlace, recv) }
		})
		add("alltoallv", "", n, func(c *ranks.Comm) func() error {
			// to rank j: n+j elements, packed; from rank j: n+me elements, with a gap of one
			me := c.Rank()
			sc, rc, rd := make([]int, np), make([]int, np), make([]int, np)
			stot, rtot := 0, 0
			for j := 0; j < np; j++ {
				sc[j] = n + j
				stot += sc[j]
				rc[j], rd[j] = n+me, rtot
				rtot += rc[j] + 1
			}
			var send, recv any = fill(make([]float64, stot), me), make([]float64, rtot)
			return func() error { return Alltoallv(c, send, sc, nil, recv, rc, rd) }
		})
		add("reduce_scatter", "", n, func(c *ranks.Comm) func() error {
			counts := make([]int, np)
			total := 0
			for r := range counts {
				counts[r] = n + r%2
				total += counts[r]
			}
			var send, recv any = fill(make([]float64, total), c.Rank()), make([]float64, n+1)
			return func() error { return ReduceScatter(c, send, recv, counts, Sum) }
		})
		add("reduce_scatter", "inplace", n, func(c *ranks.Comm) func() error {
			counts := make([]int, np)
			total := 0
			for r := range counts {
				counts[r] = n + r%2
				total += counts[r]
			}
			var recv any = fill(make([]float64, total), c.Rank())
			return func() error { return ReduceScatter(c, InPlace, recv, counts, Max) }
		})
		add("reduce_scatter", "block", n, func(c *ranks.Comm) func() error {
			var send, recv any = fill(make([]float64, n*np), c.Rank()), make([]float64, n)
			return func() error { return ReduceScatterBlock(c, send, recv, Sum) }
		})
		add("reduce_scatter", "block/inplace", n, func(c *ranks.Comm) func() error {
			var recv any = fill(make([]float64, n*np), c.Rank())
			return func() error { return ReduceScatterBlock(c, InPlace, recv, Max) }
		})
		add("reduce_scatter", "noncommutative", n, func(c *ranks.Comm) func() error {
			var send, recv any = fill(make([]float64, n*np), c.Rank()), make([]float64, n)
			return func() error { return ReduceScatterBlock(c, send, recv, userSum) }
		})
		for _, coll := range []string{"scan", "exscan"} {
			f := Scan
			if coll == "exscan" {
				f = Exscan
			}
			add(coll, "", n, func(c *ranks.Comm) func() error {
				var send, recv any = fill(make([]float64, n), c.Rank()), make([]float64, n)
				return func() error { return f(c, send, recv, Sum) }
			})
			add(coll, "inplace", n, func(c *ranks.Comm) func() error {
				var recv any = fill(make([]float64, n), c.Rank())
				return func() error { return f(c, InPlace, recv, Max) }
			})
			add(coll, "noncommutative", n, func(c *ranks.Comm) func() error {
				var send, recv any = fill(make([]float64, n), c.Rank()), make([]float64, n)
				return func() error { return f(c, send, recv, userSum) }
			})
		}
		// View arguments, packed into scratch on entry (views.go)
		col := func(n, base int) any { // every other element of a larger slice
			v, err := ranks.Vector(fill(make([]float64, 2*n), base), n, 1, 2)
			if err != nil {
				panic(err)
			}
			return v
		}
		add("allreduce", "view", n, func(c *ranks.Comm) func() error {
			send, recv := col(n, c.Rank()), col(n, 0)
			return func() error { return Allreduce(c, send, recv, Sum) }
		})
		add("allgather", "view", n, func(c *ranks.Comm) func() error {
			send, recv := col(n, c.Rank()), col(n*np, 0)
			return func() error { return Allgather(c, send, recv) }
		})
		if multi {
			continue // the neighbourhood plan sees the real layout, not the faked one
		}
		// Neighbourhood collectives on a periodic 2x2 grid (each neighbour twice, once per direction), with each
		// algorithm forced on the grid's communicator.
		for _, coll := range []string{"neighbor_allgather", "neighbor_allgatherv", "neighbor_alltoall", "neighbor_alltoallv"} {
			for _, algo := range Algorithms(coll) {
				for _, views := range []bool{false, true} {
					cases = append(cases, allocCase{name: fmt.Sprintf("%s/%s/views=%v/n=%d", coll, algo, views, n), mk: func(c *ranks.Comm) func() error {
						g, err := c.CartCreate([]int{2, 2}, []bool{true, true}, false)
						if err != nil {
							return func() error { return err }
						}
						if err := Force(g, coll, algo); err != nil {
							return func() error { return err }
						}
						const deg = 4
						counts, displs := make([]int, deg), make([]int, deg)
						for j := range counts {
							counts[j], displs[j] = n, j*(n+1)
						}
						var send, recv any = fill(make([]float64, n*deg), c.Rank()), make([]float64, (n+1)*deg)
						var one any = fill(make([]float64, n), c.Rank())
						if views {
							v1, _ := ranks.Vector(fill(make([]float64, 2*n), c.Rank()), n, 1, 2)
							vs, _ := ranks.Vector(fill(make([]float64, 2*n*deg), c.Rank()), n*deg, 1, 2)
							vr, _ := ranks.Vector(make([]float64, 2*(n+1)*deg), (n+1)*deg, 1, 2)
							one, send, recv = v1, vs, vr
						}
						switch coll {
						case "neighbor_allgather":
							return func() error { return NeighborAllgather(g, one, recv) }
						case "neighbor_allgatherv":
							return func() error { return NeighborAllgatherv(g, one, recv, counts, displs) }
						case "neighbor_alltoall":
							return func() error { return NeighborAlltoall(g, send, recv) }
						}
						return func() error { return NeighborAlltoallv(g, send, counts, nil, recv, counts, displs) }
					}})
				}
			}
		}
	}
	return cases
}
