package mem

// nonTemporalMin is the size from which the runtime's memmove uses non-temporal stores (runtime/memmove_amd64.s:
// 0x100000, forward and backward).
const nonTemporalMin = 1 << 20
