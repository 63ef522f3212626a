package collectives

import (
	"fmt"
	"testing"

	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// The node-aware algorithms run in one process with a faked rank-to-node layout: ranks are dealt to nodes round
// robin (so nodes are not contiguous in rank order), the node phases run in shared memory and the leaders talk
// point to point.
func TestHierarchicalFakeLayout(t *testing.T) {
	for _, tc := range []struct{ np, nodes int }{{7, 3}, {8, 2}, {5, 5}, {6, 1}} {
		t.Run(fmt.Sprintf("np%d_nodes%d", tc.np, tc.nodes), func(t *testing.T) {
			err := node.Run(node.Config{Ranks: tc.np}, func(c *ranks.Comm) error {
				nodes := tc.nodes
				setLayout(c, func(w int) int { return w % nodes })
				st := stateOf(c)
				if st.local != (nodes == 1) || st.hierOK() != (nodes > 1 && nodes < tc.np) {
					t.Errorf("layout: local %v hier %v", st.local, st.hierOK())
				}
				me, np := c.Rank(), c.Size()
				for _, algo := range []string{"", "recursive_doubling", "ring"} {
					for _, coll := range []string{"allreduce", "bcast", "reduce", "barrier"} {
						a := algo
						if coll != "allreduce" && algo != "" {
							a = ""
						}
						if err := Force(c, coll, a); err != nil {
							return err
						}
					}
					if err := Barrier(c); err != nil {
						return err
					}
					for _, n := range []int{0, 1, 7, 20000} {
						x := make([]float64, n)
						for i := range x {
							x[i] = float64(me*3 + i%5)
						}
						y := make([]float64, n)
						if err := Allreduce(c, x, y, Sum); err != nil {
							return err
						}
						for i := range y {
							if want := float64(3*np*(np-1)/2 + np*(i%5)); y[i] != want {
								t.Errorf("%s allreduce n=%d [%d] = %v, want %v", algo, n, i, y[i], want)
								break
							}
						}
						for root := 0; root < np; root++ {
							out := make([]float64, n)
							if err := Reduce(c, x, out, Max, root); err != nil {
								return err
							}
							if me == root && n > 0 && out[0] != float64((np-1)*3) {
								t.Errorf("reduce root %d: %v", root, out[0])
							}
							b := make([]int32, n)
							if me == root {
								for i := range b {
									b[i] = int32(root*100 + i)
								}
							}
							if err := Bcast(c, b, root); err != nil {
								return err
							}
							for i := range b {
								if b[i] != int32(root*100+i) {
									t.Errorf("bcast root %d n=%d: [%d] = %d", root, n, i, b[i])
									break
								}
							}
						}
						// the other collectives take the flat message-based algorithms on a multi-node layout
						all := make([]float64, n*np)
						if err := Allgather(c, x, all); err != nil {
							return err
						}
						for r := 0; r < np && n > 0; r++ {
							if all[r*n] != float64(r*3) {
								t.Errorf("allgather block %d: %v", r, all[r*n])
							}
						}
						a2a := make([]float64, n*np)
						if err := Alltoall(c, all, a2a); err != nil {
							return err
						}
						for r := 0; r < np && n > 0; r++ {
							if a2a[r*n] != float64(me*3) {
								t.Errorf("alltoall block %d: %v", r, a2a[r*n])
							}
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestTableParsing(t *testing.T) {
	rules, err := parseTable("allreduce multi 2-16 0-64K ring # comment\nbcast * * 1M-* scatter_allgather\n", "test")
	if err != nil || len(rules) != 2 || rules[0].bytesHi != 64<<10 || rules[1].bytesLo != 1<<20 {
		t.Fatalf("%v %+v", err, rules)
	}
	if !rules[0].matches("allreduce", selCtx{np: 4, bytes: 100}) || rules[0].matches("allreduce", selCtx{local: true, np: 4}) {
		t.Errorf("matching")
	}
	for _, bad := range []string{"allreduce * * * nope", "nope * * * ring", "allreduce x * * ring", "allreduce * a-b * ring", "allreduce * *",
		"allreduce * 8-2 * ring", "allreduce * * 9999999999999999G ring", "allreduce * * -1 ring"} {
		if _, err := parseTable(bad, "bad"); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestTableOverrides(t *testing.T) {
	env := map[string]string{"GOMPJ_COLL_ALLREDUCE": "ring", "GOMPJ_COLL_TABLE": "/x"}
	file := "# mine\nbcast local 1-4 0-1K binomial\n"
	rules, err := buildTable(func(k string) string { return env[k] },
		func(string) ([]byte, error) { return []byte(file), nil })
	if err != nil {
		t.Fatal(err)
	}
	if rules[0].coll != "allreduce" || rules[0].algo != "ring" || rules[1].coll != "bcast" || rules[1].origin != "/x" {
		t.Fatalf("override order: %+v %+v", rules[0], rules[1])
	}
	st := &commState{size: 4, local: true}
	pick := func(coll string, s selCtx) string {
		for _, r := range rules {
			if r.matches(coll, s) && algorithms[coll][r.algo](s) {
				return r.algo
			}
		}
		return lastResort[coll]
	}
	if a := pick("bcast", st.sel(true, 100)); a != "binomial" {
		t.Errorf("bcast 100 B on 4 local ranks: %s", a)
	}
	if a := pick("bcast", st.sel(true, 4096)); a != "shm" {
		t.Errorf("bcast 4 KiB on 4 local ranks: %s", a)
	}
	if a := pick("allreduce", st.sel(false, 8)); a != "shm" {
		t.Errorf("ring does not apply to a non-commutative op: got %s", a)
	}
	env["GOMPJ_COLL_BARRIER"] = "nonsense"
	if _, err := buildTable(func(k string) string { return env[k] }, nil); err == nil {
		t.Errorf("a bad override was accepted")
	}
}

// Node-aware gather, scatter and alltoall against a sequential reference, with several fake layouts: round robin
// (nodes not contiguous in rank order), blocks (node-major order is rank order), a node of one member, and as
// many nodes as ranks (no hierarchy: the flat algorithms run); every root, in place and not, hier and flat.
func TestHierarchicalMovement(t *testing.T) {
	layouts := []struct {
		name   string
		np     int
		nodeOf func(w int) int
	}{
		{"np7_rr3", 7, func(w int) int { return w % 3 }},
		{"np8_rr2", 8, func(w int) int { return w % 2 }},
		{"np8_blocks332", 8, func(w int) int { return w / 3 }},
		{"np6_lone", 6, func(w int) int { return min(w, 1) }},
		{"np5_reversed", 5, func(w int) int { return (4 - w) / 2 }},
		{"np4_flat", 4, func(w int) int { return w }},
	}
	for _, tc := range layouts {
		t.Run(tc.name, func(t *testing.T) {
			err := node.Run(node.Config{Ranks: tc.np}, func(c *ranks.Comm) error {
				setLayout(c, tc.nodeOf)
				me, np := c.Rank(), c.Size()
				if err := Force(c, "alltoall", "hier"); err != nil {
					return err
				}
				st := stateOf(c)
				if a, _ := st.choose("alltoall", st.sel(true, 4)); (a == "hier") != (tc.name != "np4_flat") {
					t.Errorf("alltoall algorithm %s", a)
				}
				val := func(from, to, i int) int32 { return int32(from*10000 + to*100 + i) }
				// bcast, large (the leaders' phase overlaps the copies in the nodes) and small
				for _, n := range []int{300 << 10, 3} {
					for root := 0; root < np; root++ {
						b := make([]byte, n)
						if me == root {
							for i := range b {
								b[i] = byte(i*7 + root)
							}
						}
						if err := Bcast(c, b, root); err != nil {
							return err
						}
						for i := range b {
							if b[i] != byte(i*7+root) {
								t.Fatalf("bcast n=%d root=%d: [%d] = %d", n, root, i, b[i])
							}
						}
					}
				}
				for _, algo := range []string{"hier", "linear"} {
					for _, coll := range []string{"gather", "scatter"} {
						if err := Force(c, coll, algo); err != nil {
							return err
						}
					}
					a2a := map[string]string{"hier": "hier", "linear": "pairwise"}[algo]
					if err := Force(c, "alltoall", a2a); err != nil {
						return err
					}
					for _, n := range []int{0, 1, 5, 3000} {
						for root := 0; root < np; root++ {
							mine := make([]int32, n)
							for i := range mine {
								mine[i] = val(me, root, i)
							}
							var out []int32
							if me == root {
								out = make([]int32, n*np+1)
							}
							if err := Gather(c, mine, out, root); err != nil {
								return err
							}
							inp := make([]int32, n*np)
							if me == root {
								copy(inp[me*n:], mine)
							}
							send := any(mine)
							if me == root {
								send = InPlace
							}
							if err := Gather(c, send, inp, root); err != nil {
								return err
							}
							if me == root {
								for r := 0; r < np; r++ {
									for i := 0; i < n; i++ {
										if out[r*n+i] != val(r, root, i) || inp[r*n+i] != val(r, root, i) {
											t.Fatalf("%s gather n=%d root=%d: block %d [%d] = %d / %d in place, want %d",
												algo, n, root, r, i, out[r*n+i], inp[r*n+i], val(r, root, i))
										}
									}
								}
							}
							var all []int32
							if me == root {
								all = make([]int32, n*np)
								for r := 0; r < np; r++ {
									for i := 0; i < n; i++ {
										all[r*n+i] = val(root, r, i)
									}
								}
							}
							got := make([]int32, n)
							if err := Scatter(c, all, got, root); err != nil {
								return err
							}
							for i := 0; i < n; i++ {
								if got[i] != val(root, me, i) {
									t.Fatalf("%s scatter n=%d root=%d: [%d] = %d, want %d", algo, n, root, i, got[i], val(root, me, i))
								}
							}
							var recv any = got
							if me == root {
								recv = InPlace
							}
							if err := Scatter(c, all, recv, root); err != nil {
								return err
							}
							if me == root {
								for i := range all {
									if all[i] != val(root, i/max(n, 1), i%max(n, 1)) {
										t.Fatalf("%s scatter in place changed the root's send", algo)
									}
								}
							}
						}
						s := make([]int32, n*np)
						for to := 0; to < np; to++ {
							for i := 0; i < n; i++ {
								s[to*n+i] = val(me, to, i)
							}
						}
						for _, inPlace := range []bool{false, true} {
							r := make([]int32, n*np)
							var err error
							if inPlace {
								copy(r, s)
								err = Alltoall(c, InPlace, r)
							} else {
								err = Alltoall(c, s, r)
							}
							if err != nil {
								return err
							}
							for from := 0; from < np; from++ {
								for i := 0; i < n; i++ {
									if r[from*n+i] != val(from, me, i) {
										t.Fatalf("%s alltoall n=%d in place %v: block %d [%d] = %d, want %d", a2a, n, inPlace,
											from, i, r[from*n+i], val(from, me, i))
									}
								}
							}
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Every collective has a last resort, and it applies to every call whatever the communicator and the op, so that
// choose always finds an algorithm.
func TestLastResortAlwaysApplies(t *testing.T) {
	if len(algorithms) != numColls || len(lastResort) != numColls {
		t.Fatalf("%d collectives with algorithms, %d with a last resort, %d ids", len(algorithms), len(lastResort), numColls)
	}
	for _, coll := range collNames {
		ok, found := algorithms[coll][lastResort[coll]]
		if !found {
			t.Errorf("%s: last resort %q is not one of its algorithms", coll, lastResort[coll])
			continue
		}
		for _, s := range []selCtx{{}, {local: true}, {hier: true}, {commutative: true}, {local: true, commutative: true}} {
			if !ok(s) {
				t.Errorf("%s: last resort %s does not apply to %+v", coll, lastResort[coll], s)
			}
		}
	}
}

// TestChooseNonblockingFollowsForce: the nonblocking choice is cached per size, yet a Force of the nonblocking
// name, or of the blocking one (which a nonblocking call follows when its own name says nothing), takes effect at
// the next call, and lifting it brings the table's choice back.
func TestChooseNonblockingFollowsForce(t *testing.T) {
	err := node.Run(node.Config{Ranks: 2}, func(c *ranks.Comm) error {
		a := &Call{Coll: "allreduce", Send: make([]byte, 8), Recv: make([]byte, 8), Sz: 8, Commutative: true,
			Kernel: func(inout, in []byte) {}}
		want := func(what, algo string) error {
			for i := 0; i < 2; i++ { // twice: the second comes from the cache
				got, err := ChooseNonblocking(c, a)
				if err != nil {
					return err
				}
				if got != algo {
					return fmt.Errorf("%s: call %d chose %q, want %q", what, i, got, algo)
				}
			}
			return nil
		}
		table, err := ChooseNonblocking(c, a)
		if err != nil {
			return err
		}
		steps := []struct{ coll, algo, want string }{
			{"allreduce", "ring", "ring"},
			{"iallreduce", "recursive_doubling", "recursive_doubling"},
			{"iallreduce", "", "ring"},
			{"allreduce", "", table},
		}
		for _, s := range steps {
			if err := Force(c, s.coll, s.algo); err != nil {
				return err
			}
			if err := want(fmt.Sprintf("Force(%s, %q)", s.coll, s.algo), s.want); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
