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
	s, err := slicePointer(what, recv)
	if err != nil {
		return s, err
	}
	if s.Len() != n {
		s.Set(reflect.MakeSlice(s.Type(), n, n))
	}
	return s, nil
}

// The Resolve calls check the targets of object collectives (ObjectPointer, objectSlice, ScatterSource) before the
// operation takes its id and anything is sent: checked only as the operation ran, after some ranks had sent, the
// rank that failed called again with a later id than its peers' and the job hung, and a bcast's root sent its
// non-pointer value and succeeded while the others failed. The runs (here and in package nbc) check again through
// the same functions, which cost nothing beside an object's encoding.

// ObjectPointer checks an object collective's receive target: a non-nil pointer (for package nbc too).
func ObjectPointer(what string, buf any) error {
	if v := reflect.ValueOf(buf); !v.IsValid() || v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("%w: %s of objects needs a non-nil pointer to receive into, got %v", ranks.ErrBuffer, what, reflect.TypeOf(buf))
	}
	return nil
}

// slicePointer returns the slice recv points to, or ErrBuffer if it does not point to one.
func slicePointer(what string, recv any) (reflect.Value, error) {
	v := reflect.ValueOf(recv)
	if !v.IsValid() || v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Slice {
		return reflect.Value{}, fmt.Errorf("%w: %s of objects needs a pointer to a slice to receive into, got %v", ranks.ErrBuffer, what, reflect.TypeOf(recv))
	}
	return v.Elem(), nil
}

// objectSlice checks a gather's receive target: a non-nil pointer to a slice whose elements take send's values.
func objectSlice(what string, recv, send any) error {
	s, err := slicePointer(what, recv)
	if err != nil {
		return err
	}
	if t := reflect.TypeOf(send); t == nil || !t.AssignableTo(s.Type().Elem()) {
		return fmt.Errorf("%w: %s: a %v into a %s", ranks.ErrType, what, reflect.TypeOf(send), s.Type())
	}
	return nil
}

// ScatterSource returns the root's slice of a scatter of objects: one element per rank (n), of a type the target
// recv points to takes (for package nbc too).
func ScatterSource(send, recv any, n int) (reflect.Value, error) {
	if err := ObjectPointer("scatter", recv); err != nil {
		return reflect.Value{}, err
	}
	sv := reflect.ValueOf(send)
	if !sv.IsValid() || sv.Kind() != reflect.Slice || sv.Len() != n {
		return reflect.Value{}, fmt.Errorf("%w: scatter of objects needs a slice of %d elements at the root, got %v", ranks.ErrBuffer, n, reflect.TypeOf(send))
	}
	if et := reflect.TypeOf(recv).Elem(); !sv.Type().Elem().AssignableTo(et) {
		return reflect.Value{}, fmt.Errorf("%w: scatter: a %s into a %v", ranks.ErrType, sv.Type().Elem(), reflect.TypeOf(recv))
	}
	return sv, nil
}

func setElem(what string, s reflect.Value, i int, x any) error {
	v := reflect.ValueOf(x)
	if !v.IsValid() || !v.Type().AssignableTo(s.Type().Elem()) {
		return fmt.Errorf("%w: %s: a %v into a %s", ranks.ErrType, what, reflect.TypeOf(x), s.Type())
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
	if err := ObjectPointer("scatter", recv); err != nil {
		return err
	}
	if c.Rank() != root {
		_, err := cc.Recv(recv, root, tag)
		return err
	}
	s, err := ScatterSource(send, recv, c.Size())
	if err != nil {
		return err
	}
	for i := 0; i < c.Size(); i++ {
		if i == root {
			reflect.ValueOf(recv).Elem().Set(s.Index(i))
			continue
		}
		if err := cc.Send(s.Index(i).Interface(), i, tag); err != nil {
			return err
		}
	}
	return nil
}
