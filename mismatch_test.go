package gompj_test

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/hang"
	"github.com/gompj/gompj/internal/harness"
)

// A buffer that does not match the root's data on one rank, in a message-based collective, is seen only by that
// rank, as the data arrives. Ranks that wait on it afterwards (its children in a tree, its partners in later
// steps) would wait for ever, so the job ends naming the rank and the error; where nobody waits on it (a leaf of a
// tree), it fails alone and the job goes on. Either way no call hangs. The cases run in one process with the
// message algorithms forced, so that they take the paths that node processes take.

// mismatchJob runs body on np ranks with coll forced to algo, and fails the test if the job does not end in time.
func mismatchJob(t *testing.T, np int, coll, algo string, body func(c *gompj.Comm) error) error {
	t.Helper()
	return hang.Within(t, coll+" "+algo, 30*time.Second, func() error {
		return gompj.RunWith(gompj.Config{Ranks: np}, func(c *gompj.Comm) error {
			if err := c.ForceAlgorithm(coll, algo); err != nil {
				return err
			}
			return body(c)
		})
	})
}

// swallow is what an erroneous program does with the bad rank's error: it goes on. The bad rank checks that its
// call failed with want; every rank then calls Barrier, which fails only if the job was ended.
func swallow(c *gompj.Comm, bad int, err, want error) error {
	if c.Rank() == bad && !errors.Is(err, want) {
		return fmt.Errorf("rank %d: got %v, want %v", bad, err, want)
	}
	if c.Rank() != bad && err != nil && !errors.Is(err, gompj.ErrAborted) {
		return fmt.Errorf("rank %d: %v", c.Rank(), err)
	}
	return c.Barrier()
}

// wantEnded checks that the job ended with the bad rank's error of class want.
func wantEnded(t *testing.T, name string, err error, bad int, want error) {
	t.Helper()
	var re *gompj.RankError
	if !errors.As(err, &re) || re.Rank != bad || !errors.Is(err, want) {
		t.Errorf("%s: the job returned %v, want it ended by rank %d's %v", name, err, bad, want)
	}
}

func TestMismatchedBufferInATree(t *testing.T) {
	const np, m = 7, 100
	// Binomial trees from root 0 on 7 ranks: 1, 3, 5 and 6 are leaves; 2 and 4 forward to others.
	for _, tc := range []struct {
		coll, algo  string
		nonblocking bool
	}{
		{"bcast", "binomial", false},
		{"bcast", "binomial", true},
		{"bcast", "linear", false},
		{"bcast", "scatter_allgather", false},
		{"scatter", "binomial", false},
		{"scatter", "binomial", true},
		{"scatter", "linear", false},
	} {
		for _, bad := range []int{2, 4, 5, 6} {
			leaf := bad == 5 || bad == 6 || tc.algo == "linear"
			if tc.algo == "scatter_allgather" {
				leaf = false // every rank passes pieces on round the ring
			}
			name := fmt.Sprintf("%s %s nonblocking=%v, rank %d's buffer short", tc.coll, tc.algo, tc.nonblocking, bad)
			err := mismatchJob(t, np, tc.coll, tc.algo, func(c *gompj.Comm) error {
				n := m
				if c.Rank() == bad {
					n = m - 1
				}
				buf := make([]float64, n)
				var all []float64
				if c.Rank() == 0 {
					for i := range buf {
						buf[i] = float64(i + 1)
					}
					all = make([]float64, np*m)
					for i := range all {
						all[i] = float64(i + 1)
					}
				}
				var err error
				switch {
				case tc.coll == "bcast" && tc.nonblocking:
					var q *gompj.Request
					if q, err = c.Ibcast(buf, 0); err == nil {
						_, err = q.Wait()
					}
				case tc.coll == "bcast":
					err = c.Bcast(buf, 0)
				case tc.nonblocking:
					var q *gompj.Request
					if q, err = c.Iscatter(all, buf, 0); err == nil {
						_, err = q.Wait()
					}
				default:
					err = c.Scatter(all, buf, 0)
				}
				if err == nil && c.Rank() != bad {
					want := make([]float64, m)
					for i := range want {
						want[i] = float64(i + 1)
						if tc.coll == "scatter" {
							want[i] += float64(c.Rank() * m)
						}
					}
					if !slices.Equal(buf, want) {
						return fmt.Errorf("rank %d received %v..., want %v...", c.Rank(), buf[:3], want[:3])
					}
				}
				return swallow(c, bad, err, gompj.ErrTruncate)
			})
			if leaf {
				if err != nil {
					t.Errorf("%s: a leaf's failure ended the job: %v", name, err)
				}
				continue
			}
			wantEnded(t, name, err, bad, gompj.ErrTruncate)
		}
	}
}

// Contributions of different sizes to a reduction on message paths: some rank sees the mismatch, and either the
// job ends with its error (when others wait on it) or goes on; no call hangs.
func TestMismatchedContributions(t *testing.T) {
	const np = 5
	for _, tc := range []struct {
		algo        string
		nonblocking bool
	}{{"recursive_doubling", false}, {"recursive_doubling", true}, {"ring", false}, {"ring", true}, {"rabenseifner", false}} {
		for _, bad := range []int{0, 3} {
			name := fmt.Sprintf("allreduce %s nonblocking=%v, rank %d's contribution short", tc.algo, tc.nonblocking, bad)
			var seen atomic.Int32
			err := mismatchJob(t, np, "allreduce", tc.algo, func(c *gompj.Comm) error {
				n := 5000
				if c.Rank() == bad {
					n = 40
				}
				send, recv := make([]float64, n), make([]float64, n)
				var err error
				if tc.nonblocking {
					var q *gompj.Request
					if q, err = c.Iallreduce(send, recv, gompj.Sum); err == nil {
						_, err = q.Wait()
					}
				} else {
					err = c.Allreduce(send, recv, gompj.Sum)
				}
				switch {
				case errors.Is(err, gompj.ErrTruncate):
					seen.Add(1)
				case err != nil && !errors.Is(err, gompj.ErrAborted):
					return fmt.Errorf("rank %d: %v", c.Rank(), err)
				}
				if err := c.Barrier(); err != nil && !errors.Is(err, gompj.ErrAborted) {
					return fmt.Errorf("rank %d: barrier: %v", c.Rank(), err)
				}
				return nil
			})
			if seen.Load() == 0 {
				t.Errorf("%s: no rank saw the mismatch", name)
			}
			var re *gompj.RankError
			if err != nil && (!errors.As(err, &re) || !errors.Is(err, gompj.ErrTruncate)) {
				t.Errorf("%s: the job returned %v, want nil or its end by a rank's ErrTruncate", name, err)
			}
		}
	}
}

// Inside a node, contributions of sizes that take different shared-memory paths (inline, staged, direct) on
// different members: the members cannot meet, so the job ends naming the disagreement, instead of hanging. (Sizes
// that differ but take the same path fail on every member with ErrArg, and the job goes on.)
func TestMismatchedPathsInSharedMemory(t *testing.T) {
	for _, tc := range []struct {
		coll       string
		small, big int // float64 elements per contribution (allgather: per block)
		np, bad    int
	}{
		{"allreduce", 10, 1000, 2, 1},  // inline and direct
		{"allreduce", 10, 300, 3, 0},   // inline and staged
		{"allreduce", 300, 5000, 4, 2}, // staged and direct
		{"allgather", 10, 1000, 3, 1},
		{"allgather", 10, 200, 2, 0},
		{"allgather", 200, 5000, 3, 2},
		{"reduce", 300, 5000, 3, 0}, // staged and direct, the root's the smaller
		{"reduce", 300, 5000, 3, 1},
		{"reduce", 5000, 300, 2, 0},
	} {
		name := fmt.Sprintf("%s np=%d, rank %d's %d elements against %d", tc.coll, tc.np, tc.bad, tc.small, tc.big)
		var seen atomic.Int32
		err := mismatchJob(t, tc.np, tc.coll, "shm", func(c *gompj.Comm) error {
			n := tc.big
			if c.Rank() == tc.bad {
				n = tc.small
			}
			var err error
			switch tc.coll {
			case "allreduce":
				err = c.Allreduce(make([]float64, n), make([]float64, n), gompj.Sum)
			case "reduce":
				err = c.Reduce(make([]float64, n), make([]float64, n), gompj.Sum, 0)
			default:
				err = c.Allgather(make([]float64, n), make([]float64, n*tc.np))
			}
			if err == nil {
				err = c.Barrier() // a member of a one-barrier path is through before the others can tell
			}
			switch {
			case errors.Is(err, gompj.ErrArg):
				seen.Add(1)
			case err != nil && !errors.Is(err, gompj.ErrAborted) && !errors.Is(err, gompj.ErrTruncate):
				return fmt.Errorf("rank %d: %v", c.Rank(), err)
			}
			return nil
		})
		var re *gompj.RankError
		if !errors.As(err, &re) || !errors.Is(err, gompj.ErrArg) || !strings.Contains(err.Error(), "different paths") {
			t.Errorf("%s: the job returned %v, want it ended by a rank's ErrArg naming the disagreement", name, err)
		}
		if seen.Load() == 0 {
			t.Errorf("%s: no rank's call failed with ErrArg", name)
		}
	}
}

// Inside a node, members that disagree about the root of a bcast, scatter or gather: two ranks that each name
// themselves root both publish and wait for acknowledgements that went to the other (or never came), and a Bcast
// so called hung. Each such root now sees the other's publication when it is about to park, and the job ends naming
// the disagreement.
func TestMismatchedRootsInSharedMemory(t *testing.T) {
	for _, tc := range []struct {
		coll string
		np   int
	}{
		{"bcast", 2}, {"bcast", 3}, {"scatter", 2}, {"scatter", 3}, {"gather", 2}, {"gather", 3},
	} {
		name := fmt.Sprintf("%s np=%d", tc.coll, tc.np)
		err := mismatchJob(t, tc.np, tc.coll, "shm", func(c *gompj.Comm) error {
			root := c.Rank() // ranks 0 and 1 each name themselves; the others name 0
			if root > 1 {
				root = 0
			}
			buf, all := make([]float64, 4), make([]float64, 4*tc.np)
			var err error
			switch tc.coll {
			case "bcast":
				err = c.Bcast(buf, root)
			case "scatter":
				err = c.Scatter(all, buf, root)
			default:
				err = c.Gather(buf, all, root)
			}
			if err == nil {
				err = c.Barrier()
			}
			if err != nil && !errors.Is(err, gompj.ErrArg) && !errors.Is(err, gompj.ErrAborted) {
				return fmt.Errorf("rank %d: %v", c.Rank(), err)
			}
			return nil
		})
		var re *gompj.RankError
		if !errors.As(err, &re) || !errors.Is(err, gompj.ErrArg) ||
			!strings.Contains(err.Error(), "disagree about the root") {
			t.Errorf("%s: the job returned %v, want it ended by a rank's ErrArg naming the disagreement", name, err)
		}
	}
}

// Across node processes (4 of 2 ranks each, over the network device and over shared memory between them), with
// the node-aware algorithms the table picks there: a node leader whose bcast buffer is short ends the job; a
// member that is not a leader fails alone and the job goes on; contributions of different sizes on one node end
// it through the leader that finds them.
func TestMismatchedAcrossNodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		coll  string
		bad   int
		ended bool
	}{
		{"bcast-leader", "bcast", 2, true},
		{"bcast-member", "bcast", 3, false},
		{"allreduce-member", "allreduce", 1, true}, // its leader, rank 0, or itself ends the job
	} {
		for _, shm := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/hostshm=%v", tc.name, shm), func(t *testing.T) {
				j := harness.Procs(t, harness.Spec{Ranks: 8, Nodes: 4, HostSHM: shm}, func(c *gompj.Comm) error {
					n := 1000
					if c.Rank() == tc.bad {
						n = 10
					}
					buf := make([]float64, n)
					var err error
					if tc.coll == "bcast" {
						err = c.Bcast(buf, 0)
					} else {
						err = c.Allreduce(make([]float64, n), buf, gompj.Sum)
					}
					if err != nil && c.Rank() != tc.bad && !errors.Is(err, gompj.ErrAborted) {
						return fmt.Errorf("rank %d: %v", c.Rank(), err)
					}
					return c.Barrier() // the bad rank swallowed its error, as an erroneous program may
				})
				out, failed := outcome(t, j)
				switch {
				case tc.ended && (failed != 4 || !strings.Contains(out, "failed: a collective it left part-way") ||
					strings.Contains(out, "connection closed")):
					t.Errorf("the job did not end on every node naming the failure, and only it (%d nodes failed); outputs:\n%s",
						failed, out)
				case !tc.ended && failed != 0:
					t.Errorf("a member's failure alone ended the job; outputs:\n%s", out)
				}
			})
		}
	}
}

// Across node processes, members that disagree about the root of a rooted collective (ranks 0 and 2, on different
// nodes, each name themselves root, and the others name 0), or about which collective comes next (rank 3 skips a
// Barrier that the others call, then all call Allreduce; rank 3 calls Dup where the others call Allreduce). Every
// such call hung: two roots of a reduce or gather wait for each other at any size, and those of a bcast or scatter
// once it goes rendezvous; the skipped Barrier waits for rank 3. The call check (ranks, callcheck.go) compares the
// members' stuck calls and ends the job naming the disagreement.
func TestMismatchedCallsAcrossNodes(t *testing.T) {
	for _, tc := range []struct {
		coll    string
		n       int
		hostSHM bool // the node processes talk through the same-host shared-memory device, not tcp
	}{
		{"reduce", 1, false}, {"gather", 1, false}, {"bcast", 1 << 17, false}, {"scatter", 1 << 17, false},
		{"ibcast", 1 << 17, false}, {"ireduce", 1, false}, {"skip-barrier", 1, false}, {"dup-allreduce", 1, false},
		{"skip-ibarrier", 1, false}, {"ibarrier-iallreduce", 1, false}, {"skip-ibarrier", 1, true},
		{"reduce", 1, true}, {"bcast", 1 << 17, true},
	} {
		t.Run(fmt.Sprintf("%s/%d/hostshm=%v", tc.coll, tc.n, tc.hostSHM), func(t *testing.T) {
			j := harness.Procs(t, harness.Spec{Ranks: 4, Nodes: 2, HostSHM: tc.hostSHM,
				Env: []string{"GOMPJ_CALL_CHECK=20ms"}},
				func(c *gompj.Comm) error {
					root := 0
					if c.Rank() == 2 {
						root = 2
					}
					buf, all := make([]float64, tc.n), make([]float64, 4*tc.n)
					var err error
					var req *gompj.Request
					switch tc.coll {
					case "reduce":
						err = c.Reduce(buf, all[:tc.n], gompj.Sum, root)
					case "gather":
						err = c.Gather(buf, all, root)
					case "bcast":
						err = c.Bcast(buf, root)
					case "scatter":
						err = c.Scatter(all, buf, root)
					case "ibcast":
						req, err = c.Ibcast(buf, root)
					case "ireduce":
						req, err = c.Ireduce(buf, all[:tc.n], gompj.Sum, root)
					case "dup-allreduce":
						if err = c.Barrier(); err == nil && c.Rank() == 3 {
							_, err = c.Dup()
						} else if err == nil {
							err = c.Allreduce(buf, all[:tc.n], gompj.Sum)
						}
					case "skip-barrier":
						if c.Rank() != 3 {
							err = c.Barrier()
						}
						if err == nil {
							err = c.Allreduce(buf, all[:tc.n], gompj.Sum)
						}
					case "skip-ibarrier": // the node-aware Ibarrier, whose node phases wait on the node's count
						if c.Rank() != 3 {
							if req, err = c.Ibarrier(); err == nil {
								_, err = req.Wait()
							}
							req = nil
						}
						if err == nil {
							err = c.Allreduce(buf, all[:tc.n], gompj.Sum)
						}
					case "ibarrier-iallreduce": // rank 1, not its node's leader, calls another collective
						if c.Rank() == 1 {
							req, err = c.Iallreduce(buf, all[:tc.n], gompj.Sum)
						} else {
							req, err = c.Ibarrier()
						}
					}
					if err == nil && req != nil {
						_, err = req.Wait()
					}
					if err == nil {
						err = c.Barrier()
					}
					if err != nil && !errors.Is(err, gompj.ErrArg) && !errors.Is(err, gompj.ErrAborted) {
						return fmt.Errorf("rank %d: %v", c.Rank(), err)
					}
					return err
				})
			out, failed := outcome(t, j)
			want := "disagree about the root"
			if tc.coll == "skip-barrier" || tc.coll == "dup-allreduce" || tc.coll == "skip-ibarrier" ||
				tc.coll == "ibarrier-iallreduce" {
				want = "disagree about the collective"
			}
			if failed != 2 || !strings.Contains(out, want) {
				t.Errorf("the job did not end on both nodes with %q (%d failed); outputs:\n%s", want, failed, out)
			}
		})
	}
}

// outcome waits for multi-node job j and returns its node processes' outputs, together, and how many failed.
func outcome(t *testing.T, j *harness.Job) (out string, failed int) {
	t.Helper()
	var all strings.Builder
	for _, r := range j.Wait(t) {
		all.WriteString(r.Output)
		if r.Code != 0 {
			failed++
		}
	}
	return all.String(), failed
}

// Inside a node, members that each take themselves for the root of a reduce on the direct path (ranks 0 and 1; the
// others name 0): each root had its members' shares combined into its own buffer and returned part of the sum
// without an error. Every member now fails with ErrArg naming the disagreement (sameRoot, after the first barrier),
// and the job goes on. On the staged path (small sums) each such root combines every contribution and returns it
// whole.
func TestReduceRootsInSharedMemory(t *testing.T) {
	const n = 1 << 17 // float64s: above the staging limit
	for _, np := range []int{2, 3, 5} {
		var told atomic.Int32
		err := mismatchJob(t, np, "reduce", "shm", func(c *gompj.Comm) error {
			root := 0
			if c.Rank() == 1 {
				root = 1
			}
			send, recv := make([]float64, n), make([]float64, n)
			err := c.Reduce(send, recv, gompj.Sum, root)
			if !errors.Is(err, gompj.ErrArg) || !strings.Contains(err.Error(), "disagree about the root") {
				return fmt.Errorf("rank %d: %v, want ErrArg naming the disagreement", c.Rank(), err)
			}
			told.Add(1)
			return c.Allreduce(send, recv, gompj.Sum) // the job goes on
		})
		if err != nil || told.Load() != int32(np) {
			t.Errorf("np=%d: the job returned %v and %d ranks were told, want all %d and the job on", np, err,
				told.Load(), np)
		}
	}
}

// Inside a node, members that disagree about the collective they call, or name each other the root, each wait in
// shared memory for what the others never do: a skipped Barrier, a Bcast where the others call Allreduce, two
// ranks that name each other the root of a Bcast, Scatter or Gather (nobody publishes). Those hung; a wait about to
// park now declares its call, and once every member has parked or returned, the job ends with ErrArg naming two
// calls that differ, or saying that none can go on (shmOp.parking).
func TestDisagreeingCallsInSharedMemory(t *testing.T) {
	for _, tc := range []struct {
		name string
		np   int
		n    int // float64s
		want string
	}{
		{"skip-barrier", 2, 1, "rank 1 called Allreduce"},
		{"skip-barrier", 4, 1, "called Allreduce"},
		// The skipper's Allreduce may pass the others' Barrier as its own first barrier: samePath then finds them in
		// another call.
		{"skip-barrier", 3, 1 << 17, "called Allreduce"},
		{"skip-barrier", 2, 1 << 17, "called Allreduce"},
		{"bcast-allreduce", 3, 1, "called Bcast with root 0"},
		{"bcast-allreduce", 2, 1 << 17, "called Bcast with root 0"},
		{"skip-return", 3, 1, "none can go on"}, // the last rank skips a Barrier and returns
		{"swap-bcast", 2, 1, "disagree about the root"},
		{"swap-bcast", 3, 1 << 17, "disagree about the root"},
		{"swap-scatter", 2, 4, "disagree about the root"},
		{"swap-gather", 3, 1 << 15, "disagree about the root"},
	} {
		name := fmt.Sprintf("%s np=%d n=%d", tc.name, tc.np, tc.n)
		err := hang.Within(t, name, 30*time.Second, func() error {
			return gompj.RunWith(gompj.Config{Ranks: tc.np}, func(c *gompj.Comm) error {
				me, last := c.Rank(), c.Size()-1
				buf, all := make([]float64, tc.n), make([]float64, tc.n*c.Size())
				root := 0 // swap: ranks 0 and 1 name each other, the others 0
				if me == 0 {
					root = 1
				}
				var err error
				switch tc.name {
				case "skip-barrier":
					if me != last {
						err = c.Barrier()
					}
					if err == nil {
						err = c.Allreduce(buf, all[:tc.n], gompj.Sum)
					}
				case "skip-return":
					if me != last {
						err = c.Barrier()
					}
				case "bcast-allreduce":
					if me == last {
						err = c.Allreduce(buf, all[:tc.n], gompj.Sum)
					} else {
						err = c.Bcast(buf, 0)
					}
				case "swap-bcast":
					err = c.Bcast(buf, root)
				case "swap-scatter":
					err = c.Scatter(all, buf, root)
				default:
					err = c.Gather(buf, all, root)
				}
				if err != nil && !errors.Is(err, gompj.ErrArg) && !errors.Is(err, gompj.ErrAborted) {
					return fmt.Errorf("rank %d: %v", me, err)
				}
				return err
			})
		})
		var re *gompj.RankError
		said := slices.ContainsFunc(strings.Split(tc.want, "|"), func(w string) bool {
			return strings.Contains(fmt.Sprint(err), w)
		})
		if !errors.As(err, &re) || !errors.Is(err, gompj.ErrArg) || !said {
			t.Errorf("%s: the job returned %v, want it ended by a rank's ErrArg with %q", name, err, tc.want)
		}
	}
}

// TestCallsLookModel: random sequences of blocking collectives (Barrier, Bcast, Allreduce, Gather, Scatter,
// Allgather, Reduce, Alltoall, Scan, Exscan, ReduceScatterBlock) inside one node process, the same on every rank, at
// random sizes (inline, staged, direct) and roots, with ranks held back at random (busy work, so that they park
// at random points) and some returning as soon as their own calls are done. The look at parked calls must never
// end such a job (it is correct), and the results must be right. Then the same sequences with one rank skipping
// one call: every such job must end with an error (the look's ErrArg, or what the calls that then pair wrongly
// find: sizes that differ), and none may hang.
func TestCallsLookModel(t *testing.T) {
	const jobs, calls = 24, 40
	seed := time.Now().UnixNano() // GOMPJ_TEST_SEED replays a run
	if s, err := strconv.ParseInt(os.Getenv("GOMPJ_TEST_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewSource(seed))
	for job := range jobs {
		np := 2 + rnd.Intn(5)
		skipper, skipAt := -1, -1
		if job%2 == 1 {
			skipper, skipAt = rnd.Intn(np), rnd.Intn(calls)
		}
		type call struct{ kind, n, root int }
		seq := make([]call, calls)
		for i := range seq {
			seq[i] = call{rnd.Intn(11), []int{1, 3, 700, 1 << 15}[rnd.Intn(4)], rnd.Intn(np)}
		}
		jobSeed := rnd.Int63()
		name := fmt.Sprintf("job %d np=%d skipper %d at %d", job, np, skipper, skipAt)
		err := hang.Within(t, name, 30*time.Second, func() error {
			return gompj.RunWith(gompj.Config{Ranks: np}, func(c *gompj.Comm) error {
				me := c.Rank()
				hold := rand.New(rand.NewSource(jobSeed + int64(me)))
				for i, cl := range seq {
					if me == skipper && i == skipAt {
						continue
					}
					for range hold.Intn(3) * 3000 { // held back at random: the others park
						runtime.Gosched()
					}
					send, recv, all := make([]float64, cl.n), make([]float64, cl.n*np), make([]float64, cl.n*np)
					for k := range send {
						send[k] = float64(me + 1)
					}
					for k := range all {
						all[k] = float64(me + 1)
					}
					sum := float64(np * (np + 1) / 2)
					// The buffers are looked at only once the call succeeded: after a failure (the job ended) a peer
					// may still be copying.
					var err error
					got, want := func() float64 { return recv[0] }, 0.0
					switch cl.kind {
					case 0:
						err = c.Barrier()
					case 1:
						err = c.Bcast(send, cl.root)
						got, want = func() float64 { return send[0] }, float64(cl.root+1)
					case 2:
						err = c.Allreduce(send, recv[:cl.n], gompj.Sum)
						want = sum
					case 3:
						err = c.Gather(send, recv, cl.root)
						if me == cl.root {
							want = 1
						}
					case 4:
						err = c.Scatter(recv, send, cl.root)
						got = func() float64 { return send[0] } // the root's send is all zeros
					case 5:
						err = c.Allgather(send, recv)
						want = 1
					case 6:
						err = c.Reduce(send, recv[:cl.n], gompj.Sum, cl.root)
						if me == cl.root {
							want = sum
						}
					case 7:
						err = c.Alltoall(all, recv)
						want = 1
					case 8:
						err = c.Scan(send, recv[:cl.n], gompj.Sum)
						want = float64((me + 1) * (me + 2) / 2)
					case 9:
						err = c.Exscan(send, recv[:cl.n], gompj.Sum)
						want = float64(me * (me + 1) / 2) // rank 0's is left alone: 0
					default:
						err = c.ReduceScatterBlock(all, recv[:cl.n], gompj.Sum)
						want = sum
					}
					if err != nil {
						return err
					}
					if v := got(); v != want {
						return fmt.Errorf("rank %d, call %d (%+v): got %v, want %v", me, i, cl, v, want)
					}
				}
				return nil
			})
		})
		switch {
		case skipper < 0 && err != nil:
			t.Errorf("%s: a correct job ended with %v", name, err)
		case skipper >= 0 && err == nil:
			t.Errorf("%s: a job with a skipped call ended without an error", name)
		case skipper >= 0:
			t.Logf("%s: %v", name, err)
		}
	}
}
