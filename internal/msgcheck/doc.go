// Package msgcheck walks msgpack bytes that came from outside the process, without decoding them, and checks them
// against the bytes that back them. The msgpack decoder trusts the lengths it reads: a few bytes that claim a string
// of four gigabytes or an array of four billion elements make it allocate for them (vmihailenco/msgpack v5.4.1
// never applies its own cap on slices), and the process dies of it, since running out of memory is not a panic
// that anything recovers. A value that passes Rules.Check holds no length, count or nesting that its bytes do not
// back, so decoding it allocates in proportion to its size.
//
// Its users are ranks (object messages from other node processes) and node/bootstrap (the coordinator's
// messages).
//
// Imports: the standard library only.
package msgcheck
