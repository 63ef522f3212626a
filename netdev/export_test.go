//go:build linux

package netdev

// crash closes every socket of d without a goodbye, as a dying process would, and stops reporting.
func (d *Device) crash() {
	done := make(chan struct{})
	d.post(func() {
		for _, p := range d.peers {
			if p == nil {
				continue
			}
			p.failed = true
			for _, c := range append(p.slots, p.conns...) {
				d.closeConn(c)
			}
		}
		close(done)
	})
	<-done
}
