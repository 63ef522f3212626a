package nbc

import (
	"testing"
	"unsafe"
)

// TestMemberLayout: a slot's member entries are whole cache lines, and each one's gen shares its line with the
// start of its inline data, so that a small contribution travels with the flag that publishes it; and its fin and
// collective's name share that line too.
func TestMemberLayout(t *testing.T) {
	var m member
	if sz := unsafe.Sizeof(m); sz%64 != 0 {
		t.Errorf("member is %d bytes, not a whole number of 64-byte lines", sz)
	}
	// the array may start 8 bytes into a line: what must share gen's line ends by byte 56 of the entry
	if off := unsafe.Offsetof(m.inline); off+8 > 64-8 {
		t.Errorf("inline data starts at %d: its first 8 bytes are not in gen's line", off)
	}
	if off := unsafe.Offsetof(m.fin); off+8 > 64-8 {
		t.Errorf("fin is at %d, not in gen's line", off)
	}
	if off := unsafe.Offsetof(m.coll); off+unsafe.Sizeof(m.coll) > 64-8 {
		t.Errorf("coll is at %d, not in gen's line", off)
	}
	s := newSlot(3)
	for j := range s.mem {
		if a, b := uintptr(unsafe.Pointer(&s.mem[j].gen))%64, uintptr(unsafe.Pointer(&s.mem[0].gen))%64; a != b {
			t.Errorf("member %d's gen is at %d in its line, member 0's at %d", j, a, b)
		}
	}
}
