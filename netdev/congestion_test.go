//go:build linux

package netdev

import (
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCongestionFor(t *testing.T) {
	addr := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 4000} }
	for _, tc := range []struct {
		cc, local, remote, want string
	}{
		{"", "127.0.0.1", "127.0.0.1", "reno"},
		{CongestionAuto, "127.0.0.1", "127.0.0.2", "reno"},
		{CongestionAuto, "::1", "::1", "reno"},
		{CongestionAuto, "10.0.0.1", "10.0.0.1", "reno"}, // a host's own address goes through loopback
		{CongestionAuto, "10.0.0.1", "10.0.0.2", ""},     // another host: the kernel's choice
		{"", "192.168.1.5", "10.0.0.2", ""},
		{CongestionSystem, "127.0.0.1", "127.0.0.1", ""},
		{"cubic", "10.0.0.1", "10.0.0.2", "cubic"},
		{"bbr", "127.0.0.1", "127.0.0.1", "bbr"},
	} {
		if got := congestionFor(tc.cc, addr(tc.local), addr(tc.remote)); got != tc.want {
			t.Errorf("congestionFor(%q, %s, %s) = %q, want %q", tc.cc, tc.local, tc.remote, got, tc.want)
		}
	}
}

func TestCheckCongestion(t *testing.T) {
	for _, ok := range []string{"", CongestionAuto, CongestionSystem, "reno"} { // Reno is built in and always allowed
		if err := checkCongestion(ok); err != nil {
			t.Errorf("checkCongestion(%q): %v", ok, err)
		}
	}
	for _, bad := range []struct{ cc, want string }{
		{"no-such-cc", `"no-such-cc"`},
		{"Reno!", "not an algorithm's name"},
		{"a-name-much-too-long", "not an algorithm's name"},
	} {
		err := checkCongestion(bad.cc)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("checkCongestion(%q) = %v, want an error with %s", bad.cc, err, bad.want)
		}
	}
	cfg := Config{Node: 0, Nodes: 2, Ranks: 2, NodeOf: func(r int) int { return r }, Secret: testSecret,
		Listen: "127.0.0.1:0", Congestion: "no-such-cc"}
	if d, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "no-such-cc") {
		if d != nil {
			d.Close()
		}
		t.Fatalf("Open with an unknown congestion control: %v, want an error naming it", err)
	}
}

// TestCongestionSet: the connections of a job on loopback get Reno by default (auto), and keep the kernel's default
// under CongestionSystem, on both ends and every stripe.
func TestCongestionSet(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		t.Skipf("the kernel's default congestion control is not readable: %v", err)
	}
	system := strings.TrimSpace(string(b))
	for _, tc := range []struct{ cc, want string }{{"", "reno"}, {CongestionSystem, system}} {
		c := startCluster(t, 2, 1, func(i int, cfg *Config) { cfg.Congestion, cfg.Stripes = tc.cc, 2 })
		for i, d := range c.devs {
			p := d.peers[1-i]
			for s, cn := range p.slots {
				cn.mu.Lock()
				fd := cn.fd
				got, err := unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION)
				cn.mu.Unlock()
				if err != nil || got != tc.want {
					t.Errorf("Congestion %q: node %d stripe %d has %q (%v), want %q", tc.cc, i, s, got, err, tc.want)
				}
			}
		}
	}
}
