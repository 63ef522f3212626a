package msgcheck

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func enc(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nest returns n arrays, each the one element of the one before, around a nil.
func nest(n int) []byte { return append(bytes.Repeat([]byte{0x91}, n), 0xc0) }

// TestRules: what msgpack encodes passes; lengths and counts that the bytes do not back, bytes after the value,
// nesting past MaxDepth and, under NoExt, extensions fail, each with ErrMalformed.
func TestRules(t *testing.T) {
	r := Rules{MaxDepth: 8}
	for _, v := range []any{nil, true, 42, -7, 3.5, "text", []byte{1, 2, 3}, []int32{1, 2}, map[string]any{"k": []any{1, "v"}},
		struct{ A, B string }{"a", "b"}, make([]byte, 70000), make([]string, 100)} {
		if err := r.Check(enc(t, v)); err != nil {
			t.Errorf("%T %v: %v", v, v, err)
		}
	}
	ext := enc(t, time.Unix(1, 0)) // time.Time encodes as an extension
	if err := r.Check(ext); err != nil {
		t.Errorf("an extension refused without NoExt: %v", err)
	}
	for name, b := range map[string][]byte{
		"array of 4G":           {0xdd, 0xff, 0xff, 0xff, 0xff},
		"map of 4G":             {0xdf, 0xff, 0xff, 0xff, 0xff},
		"str of 4 GiB":          {0xdb, 0xff, 0xff, 0xff, 0xff, 'x'},
		"bin of 4 GiB":          {0xc6, 0xff, 0xff, 0xff, 0xff, 'x'},
		"length cut short":      {0xdb, 0xff},
		"empty":                 {},
		"never used byte":       {0xc1},
		"trailing bytes":        {0xc0, 0xc0},
		"array of 2, has 1":     {0x92, 0x01},
		"nested 8 deep":         nest(8),
		"extension under NoExt": ext,
	} {
		rr := r
		if name == "extension under NoExt" {
			rr.NoExt = true
		}
		if err := rr.Check(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if err := r.Check(nest(7)); err != nil {
		t.Errorf("nested 7 deep under MaxDepth 8: %v", err)
	}
	if end, err := r.End([]byte{0xc0, 0x92, 1, 2, 0xc3}, 1); err != nil || end != 4 {
		t.Errorf("End of the array at 1: %d, %v; want 4", end, err)
	}
}

// FuzzCheck: what Check accepts is exactly one value that the decoder can step over, to the last byte.
func FuzzCheck(f *testing.F) {
	for _, v := range []any{map[string]any{"k": []any{1, "v", nil}}, []string{"a", "bc"}, 42, "text", time.Unix(5, 0)} {
		f.Add(enc(f, v))
	}
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("\xd7\xff\xdf0000000"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if (Rules{MaxDepth: 100}).Check(data) != nil {
			return
		}
		d := msgpack.NewDecoder(bytes.NewReader(data))
		if err := d.Skip(); err != nil {
			t.Fatalf("Check accepted what the decoder cannot skip: %v", err)
		}
		if d.Buffered().(*bytes.Reader).Len() != 0 {
			t.Fatal("Check accepted trailing bytes")
		}
	})
}
