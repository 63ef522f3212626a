package pool

import "sync"

// Of is a pool of *T. The zero value is ready to use.
type Of[T any] struct{ p sync.Pool }

// Get returns a zeroed *T: one given back, or a new one.
func (o *Of[T]) Get() *T {
	if v := o.p.Get(); v != nil {
		return v.(*T)
	}
	return new(T)
}

// Put zeroes x, so that the pool holds nothing of its last use (a caller's buffer, its completer), and keeps it for
// a later Get. The caller must hold the only reference left.
func (o *Of[T]) Put(x *T) {
	var zero T
	*x = zero
	o.p.Put(x)
}
