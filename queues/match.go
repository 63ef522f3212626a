package queues

// Wildcards for Envelope.Src and Envelope.Tag in receives.
const (
	AnySource = -1
	AnyTag    = -1
)

// Envelope is the matching key of a message or of a receive. Src is the sender's rank in the communicator.
type Envelope struct {
	Ctx uint32
	Src int32
	Tag int32
}

// Item is the queue node embedded (as first field) in the rank layer's receive requests and message entries.
type Item struct {
	Env Envelope
	seq uint64

	bin              *bin
	binPrev, binNext *Item // within the (ctx, src) bin, or within the wildcard list
	allPrev, allNext *Item // arrival order across bins (unexpected list only)
	queued           bool
}

// Queued reports whether the item is in a list.
func (it *Item) Queued() bool { return it.queued }

type bin struct {
	head, tail *Item
}

func (b *bin) push(it *Item) {
	it.binPrev, it.binNext = b.tail, nil
	if b.tail != nil {
		b.tail.binNext = it
	} else {
		b.head = it
	}
	b.tail = it
	it.bin = b
}

func (b *bin) unlink(it *Item) {
	if it.binPrev != nil {
		it.binPrev.binNext = it.binNext
	} else {
		b.head = it.binNext
	}
	if it.binNext != nil {
		it.binNext.binPrev = it.binPrev
	} else {
		b.tail = it.binPrev
	}
	it.binPrev, it.binNext, it.bin = nil, nil, nil
}

func binKey(ctx uint32, src int32) uint64 { return uint64(ctx)<<32 | uint64(uint32(src)) }

func tagMatches(want, have int32) bool { return want == AnyTag || want == have }

// bins is a map of (ctx, src) bins with a one-entry cache for the usual single-peer pattern.
type bins struct {
	m       map[uint64]*bin
	lastKey uint64
	last    *bin
}

func (bs *bins) get(ctx uint32, src int32, create bool) *bin {
	k := binKey(ctx, src)
	if bs.last != nil && bs.lastKey == k {
		return bs.last
	}
	b := bs.m[k]
	if b == nil {
		if !create {
			return nil
		}
		if bs.m == nil {
			bs.m = make(map[uint64]*bin)
		}
		b = &bin{}
		bs.m[k] = b
	}
	bs.lastKey, bs.last = k, b
	return b
}

// forget drops the empty bins of the contexts that ctx reports. Bins stay when they empty, so that a steady stream
// between two ranks allocates none; without this, each communicator that ever carried a message for a rank left
// that rank's bins behind (about 200 bytes per peer and communicator), without bound in a program that makes and
// frees communicators.
func (bs *bins) forget(ctx func(uint32) bool) {
	for k, b := range bs.m {
		if b.head == nil && ctx(uint32(k>>32)) {
			delete(bs.m, k)
			if bs.last == b {
				bs.last, bs.lastKey = nil, 0
			}
		}
	}
}

// Unexpected holds messages that arrived before a matching receive was posted. Every item has a concrete source
// and tag. Not safe for concurrent use: its owner locks around every call (ranks: the rank's lock, Rank.mu, which
// guards its posted and unexpected queues together).
type Unexpected struct {
	bins             bins
	allHead, allTail *Item
	n                int
}

// Len is the number of queued messages.
func (u *Unexpected) Len() int { return u.n }

// Forget drops the empty (context, source) bins of the contexts that ctx reports (a freed communicator's).
func (u *Unexpected) Forget(ctx func(uint32) bool) { u.bins.forget(ctx) }

// Push appends a message in arrival order.
func (u *Unexpected) Push(it *Item) {
	u.bins.get(it.Env.Ctx, it.Env.Src, true).push(it)
	it.allPrev, it.allNext = u.allTail, nil
	if u.allTail != nil {
		u.allTail.allNext = it
	} else {
		u.allHead = it
	}
	u.allTail = it
	it.queued = true
	u.n++
}

// Find returns the earliest-arrived message that a receive for (ctx, src, tag) would match, or nil. src and tag
// may be wildcards. The message stays queued.
func (u *Unexpected) Find(ctx uint32, src, tag int32) *Item {
	if u.n == 0 {
		return nil
	}
	if src != AnySource {
		b := u.bins.get(ctx, src, false)
		if b == nil {
			return nil
		}
		for it := b.head; it != nil; it = it.binNext {
			if tagMatches(tag, it.Env.Tag) {
				return it
			}
		}
		return nil
	}
	for it := u.allHead; it != nil; it = it.allNext {
		if it.Env.Ctx == ctx && tagMatches(tag, it.Env.Tag) {
			return it
		}
	}
	return nil
}

// Remove unlinks a queued message.
func (u *Unexpected) Remove(it *Item) {
	it.bin.unlink(it)
	if it.allPrev != nil {
		it.allPrev.allNext = it.allNext
	} else {
		u.allHead = it.allNext
	}
	if it.allNext != nil {
		it.allNext.allPrev = it.allPrev
	} else {
		u.allTail = it.allPrev
	}
	it.allPrev, it.allNext = nil, nil
	it.queued = false
	u.n--
}

// Take finds and removes the message a receive for (ctx, src, tag) matches, or returns nil.
func (u *Unexpected) Take(ctx uint32, src, tag int32) *Item {
	it := u.Find(ctx, src, tag)
	if it != nil {
		u.Remove(it)
	}
	return it
}

// Posted holds receives waiting for a message. Receives with a specific source live in (ctx, src) bins; receives
// with AnySource live in one wildcard list. Posting order across both is kept by sequence numbers.
type Posted struct {
	bins bins
	wild bin
	seq  uint64
	n    int
}

// Len is the number of posted receives.
func (p *Posted) Len() int { return p.n }

// Forget drops the empty (context, source) bins of the contexts that ctx reports (a freed communicator's).
func (p *Posted) Forget(ctx func(uint32) bool) { p.bins.forget(ctx) }

// Push posts a receive; its Env may hold wildcards.
func (p *Posted) Push(it *Item) {
	p.seq++
	it.seq = p.seq
	if it.Env.Src == AnySource {
		p.wild.push(it)
	} else {
		p.bins.get(it.Env.Ctx, it.Env.Src, true).push(it)
	}
	it.queued = true
	p.n++
}

// Find returns the earliest-posted receive that matches a message with envelope env, or nil.
func (p *Posted) Find(env Envelope) *Item {
	if p.n == 0 {
		return nil
	}
	var best *Item
	if b := p.bins.get(env.Ctx, env.Src, false); b != nil {
		for it := b.head; it != nil; it = it.binNext {
			if tagMatches(it.Env.Tag, env.Tag) {
				best = it
				break
			}
		}
	}
	for it := p.wild.head; it != nil; it = it.binNext {
		if best != nil && it.seq > best.seq {
			break // the wildcard list is in posting order: nothing later can win
		}
		if it.Env.Ctx == env.Ctx && tagMatches(it.Env.Tag, env.Tag) {
			best = it
			break
		}
	}
	return best
}

// Remove unlinks a posted receive.
func (p *Posted) Remove(it *Item) {
	it.bin.unlink(it)
	it.queued = false
	p.n--
}

// Take finds and removes the receive that a message with envelope env matches, or returns nil.
func (p *Posted) Take(env Envelope) *Item {
	it := p.Find(env)
	if it != nil {
		p.Remove(it)
	}
	return it
}
