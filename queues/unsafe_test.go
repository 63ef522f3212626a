package queues

import "unsafe"

func ptrOf(it *Item) unsafe.Pointer { return unsafe.Pointer(it) }
