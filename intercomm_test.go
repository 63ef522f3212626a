package gompj_test

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"testing"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

// The intercommunicator suite, in the three modes, on 5 ranks: group 0 is the even world ranks in reverse order
// (4 2 0) and group 1 the odd ones (3 1), so that in the node-process modes both groups span nodes and each
// group's leader is another node's rank than its rank 0's. Every collective's result is checked against a
// sequential reference computed from the world ranks.
func TestModesIntercomm(t *testing.T) {
	harness.Run(t, 5, func(world *gompj.Comm) error {
		if err := intercommSuite(world); err != nil {
			return fmt.Errorf("world rank %d: %w", world.Rank(), err)
		}
		return nil
	})
}

// interVal is world rank w's i-th input element.
func interVal(w, i int) int64 { return int64(w*1000 + i + 1) }

func interVals(w, n int) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = interVal(w, i)
	}
	return v
}

// firstOp keeps the lower ranks' contribution: a non-commutative op whose result is the first rank's input.
var firstOp = gompj.NewOp(func(in, inout []int64) { copy(inout, in) }, false)

func intercommSuite(world *gompj.Comm) error {
	me := world.Rank()
	color := me % 2
	groups := [2][]int{{4, 2, 0}, {3, 1}}
	mine, theirs := groups[color], groups[1-color]
	local, err := world.Split(color, -me)
	if err != nil {
		return err
	}
	// Group 0's leader is its local rank 1 (world 2), group 1's its local rank 0 (world 3); they find each other
	// in the world.
	leaders := [2]int{1, 0}
	ic, err := local.IntercommCreate(leaders[color], world, groups[1-color][leaders[1-color]], 42)
	if err != nil {
		return fmt.Errorf("IntercommCreate: %w", err)
	}
	lr := ic.Rank()
	if err := checkf(ic.IsInter() && !world.IsInter() && ic.Size() == len(mine) && lr == local.Rank() &&
		ic.RemoteSize() == len(theirs) && world.RemoteSize() == 0 && world.RemoteGroup() == nil,
		"shape: inter %v size %d rank %d remote size %d", ic.IsInter(), ic.Size(), lr, ic.RemoteSize()); err != nil {
		return err
	}
	if g, r := ic.Group().WorldRanks(), ic.RemoteGroup().WorldRanks(); !slices.Equal(g, mine) || !slices.Equal(r, theirs) ||
		ic.RemoteGroup().Rank() != gompj.Undefined {
		return fmt.Errorf("groups %v and %v, want %v and %v", g, r, mine, theirs)
	}

	// Point-to-point: ranks name the remote group, sources are the senders' local ranks.
	for j := range theirs {
		if err := ic.Send([]int{me, j}, j, 5); err != nil {
			return err
		}
	}
	got := make([]int, 2)
	for range theirs {
		st, err := ic.Recv(got, gompj.AnySource, 5)
		if err != nil {
			return err
		}
		if got[0] != theirs[st.Source] || got[1] != lr {
			return fmt.Errorf("p2p: %v from source %d", got, st.Source)
		}
	}
	if lr < len(theirs) { // a rendezvous-sized exchange with the remote rank of the same local rank
		big := make([]int64, 40000)
		if _, err := ic.Sendrecv(interVals(me, len(big)), lr, 6, big, lr, 6); err != nil {
			return err
		}
		if !slices.Equal(big, interVals(theirs[lr], len(big))) {
			return fmt.Errorf("large p2p exchange with remote rank %d", lr)
		}
	}
	// Several goroutines of each rank at once, each on its own tag.
	var wg sync.WaitGroup
	gerrs := make([]error, 3)
	for g := range gerrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range theirs {
				if err := ic.Send([]int{me, g, j}, j, 20+g); err != nil {
					gerrs[g] = err
					return
				}
			}
			in := make([]int, 3)
			for range theirs {
				st, err := ic.Recv(in, gompj.AnySource, 20+g)
				if err == nil && (in[0] != theirs[st.Source] || in[1] != g || in[2] != lr) {
					err = fmt.Errorf("goroutine %d got %v from remote rank %d", g, in, st.Source)
				}
				if err != nil {
					gerrs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(gerrs...); err != nil {
		return err
	}
	if err := ic.Send([]int{1}, len(theirs), 0); !errors.Is(err, gompj.ErrRank) {
		return fmt.Errorf("send to remote rank %d of %d: %v", len(theirs), len(theirs), err)
	}

	if err := intercommCollectives(ic, me, color, groups); err != nil {
		return err
	}
	if err := intercommObjects(ic, me, color, groups); err != nil {
		return fmt.Errorf("objects: %w", err)
	}

	// Merge: group 1 high, so group 0 comes first; then both low, so the group of the lower world rank 0 (group 1's
	// world 3 against group 0's world 4) comes first.
	for _, tc := range []struct {
		high  [2]bool
		order []int
	}{
		{[2]bool{false, true}, []int{4, 2, 0, 3, 1}},
		{[2]bool{true, false}, []int{3, 1, 4, 2, 0}},
		{[2]bool{false, false}, []int{3, 1, 4, 2, 0}},
	} {
		m, err := ic.Merge(tc.high[color])
		if err != nil {
			return fmt.Errorf("Merge: %w", err)
		}
		if err := useComm(m, me, tc.order); err != nil {
			return fmt.Errorf("Merge(%v): %w", tc.high, err)
		}
		if err := m.Free(); err != nil {
			return err
		}
	}

	// Dup: a congruent intercommunicator whose traffic stays apart.
	d, err := ic.Dup()
	if err != nil {
		return err
	}
	if ic.Compare(ic) != gompj.Ident || ic.Compare(d) != gompj.Congruent || ic.Compare(local) != gompj.Unequal {
		return fmt.Errorf("Compare: %v %v %v", ic.Compare(ic), ic.Compare(d), ic.Compare(local))
	}
	if !d.IsInter() || !slices.Equal(d.RemoteGroup().WorldRanks(), theirs) {
		return fmt.Errorf("Dup lost the remote group")
	}
	if lr == 0 {
		if err := d.Send([]int{2}, 0, 9); err != nil {
			return err
		}
		if err := ic.Send([]int{1}, 0, 9); err != nil {
			return err
		}
		one := []int{0}
		if _, err := ic.Recv(one, 0, 9); err != nil || one[0] != 1 {
			return fmt.Errorf("intercomm got %v (%v)", one, err)
		}
		if _, err := d.Recv(one, 0, 9); err != nil || one[0] != 2 {
			return fmt.Errorf("dup got %v (%v)", one, err)
		}
	}
	if err := d.Barrier(); err != nil {
		return err
	}

	if err := intercommErrors(world, local, ic, me, color); err != nil {
		return fmt.Errorf("errors: %w", err)
	}
	if err := errors.Join(d.Free(), ic.Free(), local.Free()); err != nil {
		return err
	}
	if err := ic.Barrier(); !errors.Is(err, gompj.ErrComm) {
		return fmt.Errorf("barrier on a freed intercommunicator: %v", err)
	}
	return nil
}

// intercommCollectives runs every intercommunicator collective with every root, against references.
func intercommCollectives(ic *gompj.Comm, me, color int, groups [2][]int) error {
	theirs := groups[1-color]
	lr := ic.Rank()
	for rep := 0; rep < 2; rep++ {
		if err := ic.Barrier(); err != nil {
			return err
		}
	}
	// Rooted collectives: each group in turn holds the root, at each of its ranks.
	for side := 0; side < 2; side++ {
		for root := range groups[side] {
			rootWorld, other := groups[side][root], groups[1-side]
			arg := root // the other group passes the root's remote rank
			if color == side {
				arg = gompj.ProcNull
				if lr == root {
					arg = gompj.Root
				}
			}
			where := fmt.Sprintf("root %d of group %d", root, side)
			for _, n := range []int{1, 7, 20000} {
				// Bcast: the root's vector to the other group; the rest of the root's group is left alone.
				buf := interVals(me, n)
				if arg == gompj.Root {
					buf = interVals(rootWorld, n)
				} else if color != side {
					buf = make([]int64, n)
				}
				if err := ic.Bcast(buf, arg); err != nil {
					return fmt.Errorf("bcast %s: %w", where, err)
				}
				want := interVals(me, n)
				if color != side || arg == gompj.Root {
					want = interVals(rootWorld, n)
				}
				if !slices.Equal(buf, want) {
					return fmt.Errorf("bcast %s, %d elements: wrong data", where, n)
				}

				// Reduce: the other group's sum (and first contribution) at the root.
				for _, op := range []struct {
					op  gompj.Op
					ref func(i int) int64
				}{
					{gompj.Sum, func(i int) int64 {
						var s int64
						for _, w := range other {
							s += interVal(w, i)
						}
						return s
					}},
					{firstOp, func(i int) int64 { return interVal(other[0], i) }},
				} {
					recv := make([]int64, n)
					if err := ic.Reduce(interVals(me, n), recv, op.op, arg); err != nil {
						return fmt.Errorf("reduce %s: %w", where, err)
					}
					for i := range recv {
						want := int64(0)
						if arg == gompj.Root {
							want = op.ref(i)
						}
						if recv[i] != want {
							return fmt.Errorf("reduce %s: element %d = %d, want %d", where, i, recv[i], want)
						}
					}
				}
			}

			// Gather and Scatter with blocks of side+2 elements from (to) each rank of the other group.
			blk := side + 2
			gat := make([]int64, len(other)*blk+1)
			gat[len(gat)-1] = -7 // beyond the blocks: untouched
			if err := ic.Gather(interVals(me, blk), gat, arg); err != nil {
				return fmt.Errorf("gather %s: %w", where, err)
			}
			if arg == gompj.Root {
				for k, w := range other {
					if !slices.Equal(gat[k*blk:(k+1)*blk], interVals(w, blk)) {
						return fmt.Errorf("gather %s: block %d = %v", where, k, gat[k*blk:(k+1)*blk])
					}
				}
				if gat[len(gat)-1] != -7 {
					return fmt.Errorf("gather %s wrote past the blocks", where)
				}
			}
			var scat []int64
			if arg == gompj.Root {
				for _, w := range other {
					scat = append(scat, interVals(w+100, blk)...)
				}
			}
			sr := make([]int64, blk)
			if err := ic.Scatter(scat, sr, arg); err != nil {
				return fmt.Errorf("scatter %s: %w", where, err)
			}
			if color != side && !slices.Equal(sr, interVals(me+100, blk)) {
				return fmt.Errorf("scatter %s: got %v", where, sr)
			}

			// Gatherv and Scatterv: remote rank k's block has k+1+side elements, with a gap of one after each.
			counts, displs, total := make([]int, len(other)), make([]int, len(other)), 0
			for k := range other {
				counts[k], displs[k] = k+1+side, total
				total += counts[k] + 1
			}
			mine := lr + 1 + side // this rank's block, when in the other group
			gv := make([]int64, total)
			for i := range gv {
				gv[i] = -5
			}
			if err := ic.Gatherv(interVals(me, mine), gv, counts, displs, arg); err != nil {
				return fmt.Errorf("gatherv %s: %w", where, err)
			}
			var sv []int64
			if arg == gompj.Root {
				sv = make([]int64, total)
				for k, w := range other {
					if !slices.Equal(gv[displs[k]:displs[k]+counts[k]], interVals(w, counts[k])) || gv[displs[k]+counts[k]] != -5 {
						return fmt.Errorf("gatherv %s: block %d = %v", where, k, gv[displs[k]:displs[k]+counts[k]+1])
					}
					copy(sv[displs[k]:], interVals(w+200, counts[k]))
				}
			}
			svr := make([]int64, mine)
			if err := ic.Scatterv(sv, counts, displs, svr, arg); err != nil {
				return fmt.Errorf("scatterv %s: %w", where, err)
			}
			if color != side && !slices.Equal(svr, interVals(me+200, mine)) {
				return fmt.Errorf("scatterv %s: got %v", where, svr)
			}
		}
	}

	// Allreduce: each group gets the other's reduction.
	for _, n := range []int{1, 5000} {
		recv := make([]int64, n)
		if err := ic.Allreduce(interVals(me, n), recv, gompj.Sum); err != nil {
			return fmt.Errorf("allreduce: %w", err)
		}
		for i := range recv {
			var want int64
			for _, w := range theirs {
				want += interVal(w, i)
			}
			if recv[i] != want {
				return fmt.Errorf("allreduce of %d: element %d = %d, want %d", n, i, recv[i], want)
			}
		}
	}

	// Allgather: group 0 sends 2 elements, group 1 sends 3; each gets the other's blocks. The receive buffer is
	// one element longer than the blocks, and that element stays.
	myBlk, theirBlk := color+2, (1-color)+2
	ag := make([]int64, len(theirs)*theirBlk+1)
	ag[len(ag)-1] = -9
	if err := ic.Allgather(interVals(me, myBlk), ag); err != nil {
		return fmt.Errorf("allgather: %w", err)
	}
	for k, w := range theirs {
		if !slices.Equal(ag[k*theirBlk:(k+1)*theirBlk], interVals(w, theirBlk)) {
			return fmt.Errorf("allgather: block %d = %v", k, ag[k*theirBlk:(k+1)*theirBlk])
		}
	}
	if ag[len(ag)-1] != -9 {
		return fmt.Errorf("allgather wrote past the blocks")
	}

	// Allgatherv: this rank sends lr+1+color elements; remote rank k's block (k+1+(1-color) elements) lands packed.
	avc := make([]int, len(theirs))
	avTotal := 0
	for k := range theirs {
		avc[k] = k + 1 + (1 - color)
		avTotal += avc[k]
	}
	av := make([]int64, avTotal)
	if err := ic.Allgatherv(interVals(me, lr+1+color), av, avc, nil); err != nil {
		return fmt.Errorf("allgatherv: %w", err)
	}
	for k, w := range theirs {
		off := 0
		for j := 0; j < k; j++ {
			off += avc[j]
		}
		if !slices.Equal(av[off:off+avc[k]], interVals(w, avc[k])) {
			return fmt.Errorf("allgatherv: block %d = %v", k, av[off:off+avc[k]])
		}
	}

	// Alltoallv: from a rank (g, r) to remote rank k, (r+k+g)%3 + base elements; received with a gap of one.
	vcode := func(from, to, i int) int64 { return int64(from*100000000 + to*1000000 + 500000 + i) }
	for _, base := range []int{0, 9000} {
		cnt := func(g, r, k int) int { return (r+k+g)%3 + base }
		sc, rc, rd := make([]int, len(theirs)), make([]int, len(theirs)), make([]int, len(theirs))
		var vsend []int64
		rtot := 0
		for k := range theirs {
			sc[k] = cnt(color, lr, k)
			for i := 0; i < sc[k]; i++ {
				vsend = append(vsend, vcode(me, k, i))
			}
			rc[k], rd[k] = cnt(1-color, k, lr), rtot
			rtot += rc[k] + 1
		}
		vrecv := make([]int64, rtot)
		if err := ic.Alltoallv(vsend, sc, nil, vrecv, rc, rd); err != nil {
			return fmt.Errorf("alltoallv: %w", err)
		}
		for k, w := range theirs {
			for i := 0; i < rc[k]; i++ {
				if vrecv[rd[k]+i] != vcode(w, lr, i) {
					return fmt.Errorf("alltoallv base %d: block %d element %d = %d", base, k, i, vrecv[rd[k]+i])
				}
			}
		}
	}

	// ReduceScatter: vectors of 6 elements; the other group's sum, scattered over this group as evenly as the
	// size allows. ReduceScatterBlock: blocks of RemoteSize elements (so both groups' vectors have Size·RemoteSize).
	otherSum := func(i int) int64 {
		var s int64
		for _, w := range theirs {
			s += interVal(w, i)
		}
		return s
	}
	const rsTotal = 6
	rsc := make([]int, ic.Size())
	for i := range rsc {
		rsc[i] = rsTotal / ic.Size()
		if i < rsTotal%ic.Size() {
			rsc[i]++
		}
	}
	rs := make([]int64, rsc[lr]+1)
	rs[len(rs)-1] = -3
	if err := ic.ReduceScatter(interVals(me, rsTotal), rs, rsc, gompj.Sum); err != nil {
		return fmt.Errorf("reduce_scatter: %w", err)
	}
	off := 0
	for i := 0; i < lr; i++ {
		off += rsc[i]
	}
	for i := 0; i < rsc[lr]; i++ {
		if rs[i] != otherSum(off+i) {
			return fmt.Errorf("reduce_scatter: element %d = %d, want %d", i, rs[i], otherSum(off+i))
		}
	}
	if rs[len(rs)-1] != -3 {
		return fmt.Errorf("reduce_scatter wrote past its block")
	}
	blkN := ic.RemoteSize()
	rsb := make([]int64, blkN)
	if err := ic.ReduceScatterBlock(interVals(me, ic.Size()*blkN), rsb, gompj.Sum); err != nil {
		return fmt.Errorf("reduce_scatter_block: %w", err)
	}
	for i := range rsb {
		if rsb[i] != otherSum(lr*blkN+i) {
			return fmt.Errorf("reduce_scatter_block: element %d = %d, want %d", i, rsb[i], otherSum(lr*blkN+i))
		}
	}

	// Alltoall: block k of this rank's send goes to remote rank k. The groups' blocks differ in size (group 0 sends
	// base+1 elements to each remote rank, group 1 base+2), small, then past the rendezvous switch.
	code := func(from, to, i int) int64 { return int64(from*100000000 + to*1000000 + i) }
	for _, base := range []int{0, 9000} {
		sendBlk, recvBlk := base+color+1, base+(1-color)+1
		send := make([]int64, 0, len(theirs)*sendBlk)
		for k := range theirs {
			for i := 0; i < sendBlk; i++ {
				send = append(send, code(me, k, i))
			}
		}
		a2a := make([]int64, len(theirs)*recvBlk)
		if err := ic.Alltoall(send, a2a); err != nil {
			return fmt.Errorf("alltoall: %w", err)
		}
		for k, w := range theirs {
			for i := 0; i < recvBlk; i++ {
				if a2a[k*recvBlk+i] != code(w, lr, i) {
					return fmt.Errorf("alltoall, blocks of %d: block %d element %d = %d", recvBlk, k, i, a2a[k*recvBlk+i])
				}
			}
		}
	}
	return nil
}

type interObj struct {
	From int
	Tags []string
}

// intercommObjects: Bcast, Gather, Scatter and Allgather of values that are not primitive slices.
func intercommObjects(ic *gompj.Comm, me, color int, groups [2][]int) error {
	theirs := groups[1-color]
	lr := ic.Rank()
	// Group 1's rank 0 is the root of the rooted ones.
	arg := 0
	if color == 1 {
		arg = gompj.ProcNull
		if lr == 0 {
			arg = gompj.Root
		}
	}
	var o interObj
	if arg == gompj.Root {
		o = interObj{From: me, Tags: []string{"a", "b"}}
	}
	if err := ic.Bcast(&o, arg); err != nil {
		return err
	}
	if color == 0 && (o.From != groups[1][0] || len(o.Tags) != 2) {
		return fmt.Errorf("bcast: %+v", o)
	}
	var names []string
	if err := ic.Gather(fmt.Sprint("rank", me), &names, arg); err != nil {
		return err
	}
	if arg == gompj.Root {
		for k, w := range groups[0] {
			if names[k] != fmt.Sprint("rank", w) {
				return fmt.Errorf("gather: %v", names)
			}
		}
	}
	var part string
	var parts []string
	if arg == gompj.Root {
		for _, w := range groups[0] {
			parts = append(parts, fmt.Sprint("for", w))
		}
	}
	if err := ic.Scatter(parts, &part, arg); err != nil {
		return err
	}
	if color == 0 && part != fmt.Sprint("for", me) {
		return fmt.Errorf("scatter: %q", part)
	}
	var all []interObj
	if err := ic.Allgather(interObj{From: me}, &all); err != nil {
		return err
	}
	for k, w := range theirs {
		if all[k].From != w {
			return fmt.Errorf("allgather: %+v", all)
		}
	}
	return nil
}

// intercommErrors: bad input gets its class on every rank concerned, and nothing is left waiting. Where a leader
// finds the error, both leaders are given bad arguments, so that both groups fail rather than wait.
func intercommErrors(world, local, ic *gompj.Comm, me, color int) error {
	lr := ic.Rank()
	leader := [2]int{1, 0}[color] == local.Rank()
	other := [2]int{3, 2}[color] // the other group's leader in the world
	mate := [2]int{0, 1}[color]  // a rank of this leader's own group
	atLeader := func(good, bad int) int {
		if leader {
			return bad
		}
		return good
	}
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"local leader out of range", func() error {
			_, err := local.IntercommCreate(7, world, other, 1)
			return err
		}, gompj.ErrRank},
		{"remote leader out of range", func() error {
			_, err := local.IntercommCreate([2]int{1, 0}[color], world, atLeader(other, 99), 1)
			return err
		}, gompj.ErrRank},
		{"remote leader in the local group", func() error {
			_, err := local.IntercommCreate([2]int{1, 0}[color], world, atLeader(other, mate), 1)
			return err
		}, gompj.ErrRank},
		{"no peer at the leader", func() error {
			peer := world
			if leader {
				peer = nil
			}
			_, err := local.IntercommCreate([2]int{1, 0}[color], peer, other, 1)
			return err
		}, gompj.ErrComm},
		{"bad tag at the leader", func() error {
			_, err := local.IntercommCreate([2]int{1, 0}[color], world, other, atLeader(1, -4))
			return err
		}, gompj.ErrTag},
		{"IntercommCreate on an intercommunicator", func() error {
			_, err := ic.IntercommCreate(0, world, other, 1)
			return err
		}, gompj.ErrComm},
		{"bcast root out of range", func() error { return ic.Bcast(make([]int, 1), 9) }, gompj.ErrRoot},
		{"reduce root out of range", func() error {
			return ic.Reduce([]int{1}, make([]int, 1), gompj.Sum, -9)
		}, gompj.ErrRoot},
		{"allreduce in place", func() error { return ic.Allreduce(gompj.InPlace, make([]int, 1), gompj.Sum) }, gompj.ErrArg},
		{"alltoall uneven", func() error { return ic.Alltoall(make([]int, 7), make([]int, 7)) }, gompj.ErrArg},
		{"scan", func() error { return ic.Scan([]int{1}, make([]int, 1), gompj.Sum) }, gompj.ErrComm},
		{"exscan", func() error { return ic.Exscan([]int{1}, make([]int, 1), gompj.Sum) }, gompj.ErrComm},
		{"ibarrier", func() error { _, err := ic.Ibarrier(); return err }, gompj.ErrComm},
		{"gatherv root out of range", func() error {
			return ic.Gatherv([]int{1}, make([]int, 3), []int{1, 1, 1}, nil, 5)
		}, gompj.ErrRoot},
		{"allgatherv counts of the wrong length", func() error {
			return ic.Allgatherv([]int{1}, make([]int, 9), []int{1, 1, 1, 1}, nil)
		}, gompj.ErrArg},
		{"reduce_scatter counts that miss the vector", func() error {
			return ic.ReduceScatter(make([]int, 7), make([]int, 7), make([]int, ic.Size()), gompj.Sum)
		}, gompj.ErrArg},
		{"reduce_scatter_block in place", func() error {
			return ic.ReduceScatterBlock(gompj.InPlace, make([]int, 6), gompj.Sum)
		}, gompj.ErrArg},
		{"split", func() error { _, err := ic.Split(0, 0); return err }, gompj.ErrComm},
		{"split node", func() error { _, err := ic.SplitNode(); return err }, gompj.ErrComm},
		{"create", func() error { _, err := ic.Create(ic.Group()); return err }, gompj.ErrComm},
		{"create group", func() error { _, err := ic.CreateGroup(ic.Group(), 1); return err }, gompj.ErrComm},
		{"merge of an intracommunicator", func() error { _, err := local.Merge(true); return err }, gompj.ErrComm},
	}
	for _, tc := range cases {
		if err := tc.call(); !errors.Is(err, tc.want) {
			return fmt.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	// Overlapping groups: {0 1 2} and {2 3 4}. World rank 2 is in both, so it runs both calls at once.
	gA, _ := world.Group().Incl([]int{0, 1, 2})
	gB, _ := world.Group().Incl([]int{2, 3, 4})
	var cA, cB *gompj.Comm
	var err error
	if me <= 2 {
		if cA, err = world.CreateGroup(gA, 1); err != nil {
			return err
		}
	}
	if me >= 2 {
		if cB, err = world.CreateGroup(gB, 2); err != nil {
			return err
		}
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, lc := range []*gompj.Comm{cA, cB} {
		if lc == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A's leader is its rank 0 (world 0), B's its rank 1 (world 3).
			_, err := lc.IntercommCreate(i, world, [2]int{3, 0}[i], 77)
			if !errors.Is(err, gompj.ErrGroup) {
				errs[i] = fmt.Errorf("overlapping groups: %v, want ErrGroup", err)
			}
			errs[i] = errors.Join(errs[i], lc.Free())
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	_ = lr
	// After all that, the intercommunicator still works.
	sum := make([]int64, 1)
	if err := ic.Allreduce([]int64{int64(me)}, sum, gompj.Sum); err != nil {
		return err
	}
	want := int64(1 + 3)
	if color == 1 {
		want = 4 + 2 + 0
	}
	return checkf(sum[0] == want, "allreduce after the errors: %d, want %d", sum[0], want)
}

// Intercommunicators over random partitions of 2..8 ranks, with random leaders, on one node (the shared-memory
// algorithms in the local phases), every collective against the sequential reference; then Merge.
func TestIntercommPartitions(t *testing.T) {
	nps := []int{2, 3, 4, 5, 6, 7, 8}
	if testing.Short() {
		nps = []int{2, 3, 5, 8}
	}
	for _, np := range nps {
		err := gompj.RunWith(gompj.Config{Ranks: np}, func(world *gompj.Comm) error {
			me := world.Rank()
			for trial := 0; trial < 3; trial++ {
				rng := rand.New(rand.NewSource(int64(np*100 + trial)))
				perm := rng.Perm(np)
				cut := 1 + rng.Intn(np-1)
				groups := [2][]int{perm[:cut], perm[cut:]}
				color := 1
				if slices.Contains(groups[0], me) {
					color = 0
				}
				leaders := [2]int{rng.Intn(len(groups[0])), rng.Intn(len(groups[1]))}
				local, err := world.Split(color, slices.Index(groups[color], me))
				if err != nil {
					return err
				}
				ic, err := local.IntercommCreate(leaders[color], world, groups[1-color][leaders[1-color]], trial)
				if err != nil {
					return fmt.Errorf("IntercommCreate: %w", err)
				}
				if err := intercommCollectives(ic, me, color, groups); err != nil {
					return fmt.Errorf("groups %v, rank %d: %w", groups, me, err)
				}
				m, err := ic.Merge(color == 1)
				if err != nil {
					return err
				}
				if err := useComm(m, me, append(slices.Clone(groups[0]), groups[1]...)); err != nil {
					return fmt.Errorf("merge of %v: %w", groups, err)
				}
				if err := errors.Join(m.Free(), ic.Free(), local.Free()); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("np=%d: %v", np, err)
		}
	}
}
