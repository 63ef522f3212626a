package ranks

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

type fuzzRecord struct {
	N     int
	Name  string
	Vals  []float64
	Attrs map[string]int
	Next  *fuzzRecord
}

// FuzzDecodeInto: an object message's bytes come from another node process; whatever they are, decoding them into
// any target returns the value or an ErrType error, and never panics or writes a partial value. The one exception
// is an array target and a longer array message: ErrTruncate, and exactly the elements that fit.
func FuzzDecodeInto(f *testing.F) {
	for _, v := range []any{
		fuzzRecord{N: 3, Name: "x", Vals: []float64{1, 2}, Attrs: map[string]int{"a": 1}, Next: &fuzzRecord{N: 4}},
		[]string{"a", "bc"}, map[string]any{"k": []any{1, "v", nil}}, 42, "text", nil, []int32{1, 2, 3}, [1]int32{5},
	} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})                         // an array header claiming 4 billion elements, and nothing after it
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})                         // the same for a map
	f.Add([]byte{0xdb, 0xff, 0xff, 0xff, 0xff})                         // and a string
	f.Add(bytes.Repeat([]byte{0x91}, 1<<20))                            // a million nested one-element arrays
	f.Add([]byte("\xd7\xff\xdf0000000"))                                // an extension where a map goes: its payload claims 800M entries
	f.Add([]byte("\x81\xa5Attrs\xd7\x00\x81\xa1k\xdd\xff\xff\xff\xff")) // the same inside a struct
	f.Fuzz(func(t *testing.T, data []byte) {
		// checkEncoding agrees with the library's own walk: what it accepts is exactly one value the decoder can
		// step over, to the last byte.
		if checkEncoding(data) == nil {
			d := msgpack.NewDecoder(bytes.NewReader(data))
			if err := d.Skip(); err != nil {
				t.Fatalf("checkEncoding accepted what the decoder cannot skip: %v", err)
			}
			if d.Buffered().(*bytes.Reader).Len() != 0 {
				t.Fatal("checkEncoding accepted trailing bytes")
			}
		}
		check := func(target any, before func() bool) {
			t.Helper()
			err := decodeInto(target, data)
			if err != nil && !errors.Is(err, ErrType) {
				t.Fatalf("decoding into %T: %v is not ErrType", target, err)
			}
			if err != nil && !before() {
				t.Fatalf("a failed decode into %T changed the target", target)
			}
		}
		rec := fuzzRecord{N: -1}
		check(&rec, func() bool { return rec.N == -1 && rec.Name == "" && rec.Next == nil })
		strs := []string{"keep"}
		check(&strs, func() bool { return len(strs) == 1 && strs[0] == "keep" })
		m := map[string]any{"keep": 1}
		check(&m, func() bool { return len(m) == 1 })
		var x any = "keep"
		check(&x, func() bool { return x == "keep" })
		n := -7
		check(&n, func() bool { return n == -7 })
		arr := [2]int32{-1, -1}
		if err := decodeInto(&arr, data); errors.Is(err, ErrTruncate) {
			var all []int32
			if msgpack.Unmarshal(data, &all) != nil || len(all) <= 2 || arr != [2]int32{all[0], all[1]} {
				t.Fatalf("truncated into %v from %v", arr, all)
			}
		} else if err != nil && (!errors.Is(err, ErrType) || arr != [2]int32{-1, -1}) {
			t.Fatalf("decoding into [2]int32: %v, target %v", err, arr)
		}
	})
}

// Every encoding our encoder makes passes checkEncoding, nested to the limit; one level more does not.
func TestCheckEncodingAcceptsOurs(t *testing.T) {
	for _, v := range []any{
		nil, true, 0, -1, 1 << 40, -1 << 40, 3.5, float32(1.5), "", "s", string(make([]byte, 70000)), []byte{1, 2},
		make([]byte, 70000), []int{1, 2, 3}, make([]int64, 70000), map[string]int{"a": 1},
		fuzzRecord{N: 1, Name: "n", Vals: make([]float64, 20), Attrs: map[string]int{"x": 2}, Next: &fuzzRecord{}},
		time.Unix(1e9, 5).UTC(), []any{map[string]any{"k": []any{nil, 1.5, "x"}}},
	} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkEncoding(b); err != nil {
			t.Errorf("%T %.40v: %v", v, v, err)
		}
	}
	nest := func(depth int) []byte { return append(bytes.Repeat([]byte{0x91}, depth), 0xc0) }
	if err := checkEncoding(nest(maxObjectDepth - 1)); err != nil {
		t.Errorf("%d levels: %v", maxObjectDepth, err)
	}
	if err := checkEncoding(nest(maxObjectDepth)); err == nil {
		t.Errorf("%d levels accepted", maxObjectDepth+1)
	}
	var target any
	if err := decodeInto(&target, nest(maxObjectDepth)); !errors.Is(err, ErrType) {
		t.Errorf("too deep a message: %v, want ErrType", err)
	}
}

// Checking never rejects a good message: time values (extensions) of every kind of nanosecond field, beside and
// inside maps, round-trip whatever their payload bytes look like.
func TestDecodeIntoTimesBesideMaps(t *testing.T) {
	type rec struct {
		M  map[string]int
		T  time.Time
		MT map[string]time.Time
		A  []any
	}
	for ns := int64(0); ns < 1e9; ns += 999983 { // every top byte of the payload
		at := time.Unix(1_800_000_000+ns, ns).UTC()
		in := rec{M: map[string]int{"a": 1}, T: at, MT: map[string]time.Time{"t": at}, A: []any{at, "x"}}
		b, err := msgpack.Marshal(&in)
		if err != nil {
			t.Fatal(err)
		}
		var out rec
		if err := decodeInto(&out, b); err != nil {
			t.Fatalf("nanoseconds %d: %v", ns, err)
		}
		if !out.T.Equal(at) || !out.MT["t"].Equal(at) || out.M["a"] != 1 {
			t.Fatalf("nanoseconds %d: decoded %+v", ns, out)
		}
	}
}

// A message whose counts are backed by bytes can still ask for far more memory than it holds, where each element
// takes one byte (a nil) and decodes into a large one (a zero struct): it is refused with ErrType before the decoder
// allocates for it, whatever nests the slice; a message of real elements of the same type, and a large one of
// small elements, decode.
func TestDecodeIntoBoundedAlloc(t *testing.T) {
	type big struct {
		A [1024]byte
		N int
	}
	type holder struct {
		Name  string
		Items []big
	}
	nils := func(n int) []byte { // an array of n nils
		b := []byte{0xdd, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
		return append(b, bytes.Repeat([]byte{0xc0}, n)...)
	}
	const n = 1 << 20 // 1 MiB of nils; 1 GiB of big
	inHolder := append([]byte("\x82\xa4Name\xa1x\xa5Items"), nils(n)...)
	for _, tc := range []struct {
		name   string
		target any
		data   []byte
	}{
		{"slice", new([]big), nils(n)},
		{"slice of pointers", new([]*[]big), append([]byte{0x91}, nils(n)...)},
		{"in a struct", new(holder), inHolder},
		{"map", new(map[int]big), append([]byte{0xdf, 0, 0x10, 0, 0}, bytes.Repeat([]byte{0x01, 0xc0}, n)...)},
	} {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		err := decodeInto(tc.target, tc.data)
		runtime.ReadMemStats(&m1)
		if !errors.Is(err, ErrType) {
			t.Errorf("%s: %v, want ErrType", tc.name, err)
		}
		if a := m1.TotalAlloc - m0.TotalAlloc; a > 64<<20 {
			t.Errorf("%s: refusing took %d bytes", tc.name, a)
		}
	}
	items := make([]big, 1000)
	items[999].N = 7
	b, err := msgpack.Marshal(holder{Name: "y", Items: items})
	if err != nil {
		t.Fatal(err)
	}
	var h holder
	if err := decodeInto(&h, b); err != nil || len(h.Items) != 1000 || h.Items[999].N != 7 {
		t.Fatalf("1000 real elements: %v, %d items", err, len(h.Items))
	}
	fs := make([]float64, 1<<20)
	if b, err = msgpack.Marshal(fs); err != nil {
		t.Fatal(err)
	}
	var out []float64
	if err := decodeInto(&out, b); err != nil || len(out) != len(fs) {
		t.Fatalf("a million float64: %v, %d", err, len(out))
	}
}
