package collectives

import (
	"fmt"
	"reflect"

	"github.com/gompj/gompj/ranks"
)

// Collectives of objects: values that are not primitive slices travel msgpack-encoded, one message per value, by
// simple linear or binomial patterns (objects are for convenience, not speed).
//
//	Bcast:     buf is a pointer to the value, on every rank
//	Gather:    send is a value; recv (root) is a pointer to a slice of that value's type, resized to the size
//	Allgather: as Gather, on every rank
//	Scatter:   send (root) is a slice with one element per rank; recv is a pointer to an element

func isObject(buf any) bool {
	if buf == nil || isInPlace(buf) || isView(buf) {
		return false // a *View, even a nil one, is a buffer (a nil one is then ErrBuffer), never an object
	}
	_, err := viewOf(buf, "")
	return err != nil
}

// SliceTarget checks that recv points to a slice and sizes it for n elements (for package nbc too).
func SliceTarget(what string, recv any, n int) (reflect.Value, error) {
	return sliceTarget(what, recv, n)
}

// SetElem sets element i of slice s to x, or fails with ErrType (for package nbc too).
func SetElem(what string, s reflect.Value, i int, x any) error { return setElem(what, s, i, x) }

// sliceTarget checks that recv points to a slice and sizes it for n elements.
func sliceTarget(what string, recv any, n int) (reflect.Value, error) {
	v := reflect.ValueOf(recv)
	if !v.IsValid() || v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Slice {
		return reflect.Value{}, fmt.Errorf("%w: %s of objects needs a pointer to a slice to receive into, got %T", ranks.ErrBuffer, what, recv)
	}
	s := v.Elem()
	if s.Len() != n {
		s.Set(reflect.MakeSlice(s.Type(), n, n))
	}
	return s, nil
}

func setElem(what string, s reflect.Value, i int, x any) error {
	v := reflect.ValueOf(x)
	if !v.IsValid() || !v.Type().AssignableTo(s.Type().Elem()) {
		return fmt.Errorf("%w: %s: a %T into a %s", ranks.ErrType, what, x, s.Type())
	}
	s.Index(i).Set(v)
	return nil
}

func gatherObjects(c *ranks.Comm, send, recv any, root int) error {
	p := newP2P(c, stateOf(c))
	cc, tag := p.c, p.tag(tagGather)
	if c.Rank() != root {
		return cc.Send(send, root, tag)
	}
	s, err := sliceTarget("gather", recv, c.Size())
	if err != nil {
		return err
	}
	for i := 0; i < c.Size(); i++ {
		if i == root {
			if err := setElem("gather", s, i, send); err != nil {
				return err
			}
			continue
		}
		if _, err := cc.Recv(s.Index(i).Addr().Interface(), i, tag); err != nil {
			return err
		}
	}
	return nil
}

func allgatherObjects(c *ranks.Comm, send, recv any) error {
	if err := gatherObjects(c, send, recv, 0); err != nil {
		return err
	}
	if c.Rank() != 0 {
		if _, err := sliceTarget("allgather", recv, c.Size()); err != nil {
			return err
		}
	}
	return bcastObject(c, recv, 0)
}

func scatterObjects(c *ranks.Comm, send, recv any, root int) error {
	p := newP2P(c, stateOf(c))
	cc, tag := p.c, p.tag(tagScatter)
	rv := reflect.ValueOf(recv)
	if !rv.IsValid() || rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("%w: scatter of objects needs a pointer to receive into, got %T", ranks.ErrBuffer, recv)
	}
	if c.Rank() != root {
		_, err := cc.Recv(recv, root, tag)
		return err
	}
	s := reflect.ValueOf(send)
	if !s.IsValid() || s.Kind() != reflect.Slice || s.Len() != c.Size() {
		return fmt.Errorf("%w: scatter of objects needs a slice of %d elements at the root, got %T", ranks.ErrBuffer, c.Size(), send)
	}
	for i := 0; i < c.Size(); i++ {
		if i == root {
			if !s.Type().Elem().AssignableTo(rv.Elem().Type()) {
				return fmt.Errorf("%w: scatter: a %s into a %T", ranks.ErrType, s.Type().Elem(), recv)
			}
			rv.Elem().Set(s.Index(i))
			continue
		}
		if err := cc.Send(s.Index(i).Interface(), i, tag); err != nil {
			return err
		}
	}
	return nil
}
