// Package queues is the bottom of gompj: per-rank posted-receive and unexpected-message queues with MPI matching,
// and the completion flags that ranks wait on.
//
// Matching follows MPI: a message matches a receive when the contexts are equal, the receive's source is the
// message's or AnySource, and the receive's tag is the message's or AnyTag. Receives are matched in posting order
// and messages in arrival order. Entries are kept in bins per (context, source), so the common case (no wildcard)
// is a map hit and the head of a short list; wildcard receives walk an arrival-ordered list instead. Both are
// intrusive doubly linked lists of Item, which the rank layer embeds as the first field of its own structures, so
// queueing allocates nothing.
//
// A Completion is an atomic flag with spin-then-yield-then-park waiting: ranks no more numerous than cores get the
// lowest latency from spinning, and many more ranks than cores park instead of burning the CPU the rank they wait
// for needs.
//
// Imports: the standard library only.
package queues
