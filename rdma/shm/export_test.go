//go:build linux

package shm

// kill makes the endpoint vanish as a killed process would: its connections close without a goodbye and it does
// nothing more (its mappings stay, as a dead process's pages stay for its peers).
func (e *endpoint) kill() {
	e.mu.Lock()
	e.quitting = true
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.ln.Close()
	e.closed.Store(true)
}
