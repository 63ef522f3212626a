package bootstrap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/gompj/gompj/internal/msgcheck"
)

// Purpose is the handshake label of coordinator connections.
const Purpose = "bootstrap"

const (
	maxMsg     = 16 << 20
	maxHost    = 256
	maxDevices = 8
	maxDevName = 32
	maxBlob    = 4 << 10 // device.MaxAddress
	maxName    = 256
	maxReason  = 8 << 10
)

const (
	msgRegister = 1 + iota // node -> coordinator: Node, Self
	msgTable               // coordinator -> node: Table
	msgBarrier             // node -> coordinator: Name
	msgRelease             // coordinator -> node: Name
	msgAbort               // both ways: Node (who failed or aborted), Code, Reason
	msgLeave               // node -> coordinator: clean end
	msgError               // coordinator -> node: Reason (bootstrap failed)
)

// ErrBadMessage is wrapped by every error about a malformed coordinator message.
var ErrBadMessage = errors.New("bootstrap: bad message")

// Endpoint is what a node publishes through the bootstrap: the host it runs on (an identity that node processes
// able to share memory have in common) and one address blob per device it opened, by device name, each sized by
// its device (at most 4 KiB).
type Endpoint struct {
	Host  string            `msgpack:"h"`
	Addrs map[string][]byte `msgpack:"d"`
}

type message struct {
	Kind   uint8      `msgpack:"k"`
	Node   int        `msgpack:"n"`
	Self   *Endpoint  `msgpack:"a,omitempty"`
	Table  []Endpoint `msgpack:"t,omitempty"`
	Name   string     `msgpack:"b,omitempty"`
	Code   int        `msgpack:"c,omitempty"`
	Reason string     `msgpack:"r,omitempty"`
}

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadMessage, fmt.Sprintf(format, args...))
}

// messageRules: a message nests four deep (message, table, endpoint, addresses) and holds no extension.
var messageRules = msgcheck.Rules{MaxDepth: 8, NoExt: true}

// decodeMessage decodes and validates one message body for a job of nodes nodes. It never panics.
func decodeMessage(b []byte, nodes int) (m message, err error) {
	if len(b) > maxMsg {
		return m, bad("%d bytes", len(b))
	}
	// The decoder allocates what lengths claim before it reads what backs them: a message of ten bytes could claim
	// a table of four billion endpoints (msgcheck).
	if err := messageRules.Check(b); err != nil {
		return m, bad("%v", err)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b)) // one value and nothing after it: Check saw to that
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(&m); err != nil {
		return m, bad("%v", err)
	}
	inRange := m.Node >= 0 && m.Node < nodes
	// Only the fields of the message's kind may be set.
	var extra bool
	switch m.Kind {
	case msgRegister:
		extra = m.Table != nil || m.Name != "" || m.Code != 0 || m.Reason != ""
	case msgTable:
		extra = m.Node != 0 || m.Self != nil || m.Name != "" || m.Code != 0 || m.Reason != ""
	case msgBarrier, msgRelease:
		extra = m.Node != 0 || m.Self != nil || m.Table != nil || m.Code != 0 || m.Reason != ""
	case msgAbort:
		extra = m.Self != nil || m.Table != nil || m.Name != ""
	case msgLeave:
		extra = m.Node != 0 || m.Self != nil || m.Table != nil || m.Name != "" || m.Code != 0 || m.Reason != ""
	case msgError:
		extra = m.Node != 0 || m.Self != nil || m.Table != nil || m.Name != "" || m.Code != 0
	}
	if extra {
		return m, bad("kind %d with fields of another kind", m.Kind)
	}
	switch m.Kind {
	case msgRegister:
		if !inRange {
			return m, bad("register for node %d of %d", m.Node, nodes)
		}
		if m.Self == nil {
			return m, bad("register without an endpoint")
		}
		if err := checkEndpoint(m.Self); err != nil {
			return m, err
		}
	case msgTable:
		if len(m.Table) != nodes {
			return m, bad("table of %d endpoints for %d nodes", len(m.Table), nodes)
		}
		for i := range m.Table {
			if err := checkEndpoint(&m.Table[i]); err != nil {
				return m, err
			}
		}
	case msgBarrier, msgRelease:
		if m.Name == "" || len(m.Name) > maxName {
			return m, bad("barrier name of %d bytes", len(m.Name))
		}
	case msgAbort:
		if m.Node < -1 || m.Node >= nodes {
			return m, bad("abort from node %d of %d", m.Node, nodes)
		}
		if len(m.Reason) > maxReason {
			return m, bad("reason of %d bytes", len(m.Reason))
		}
	case msgLeave:
	case msgError:
		if len(m.Reason) > maxReason {
			return m, bad("reason of %d bytes", len(m.Reason))
		}
	default:
		return m, bad("unknown kind %d", m.Kind)
	}
	return m, nil
}

func checkEndpoint(e *Endpoint) error {
	if e.Host == "" || len(e.Host) > maxHost {
		return bad("host identity of %d bytes", len(e.Host))
	}
	if len(e.Addrs) == 0 || len(e.Addrs) > maxDevices {
		return bad("%d device addresses (1..%d)", len(e.Addrs), maxDevices)
	}
	for name, blob := range e.Addrs {
		if name == "" || len(name) > maxDevName {
			return bad("device name of %d bytes", len(name))
		}
		for _, r := range name {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return bad("device name %q", name)
			}
		}
		if len(blob) == 0 || len(blob) > maxBlob {
			return bad("device %s: address of %d bytes (1..%d)", name, len(blob), maxBlob)
		}
	}
	return nil
}

func encodeMessage(m *message) ([]byte, error) {
	body, err := msgpack.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(body) > maxMsg {
		return nil, fmt.Errorf("bootstrap: message of %d bytes over the limit", len(body))
	}
	out := make([]byte, 4, 4+len(body))
	binary.LittleEndian.PutUint32(out, uint32(len(body)))
	return append(out, body...), nil
}

// readMessage reads one length-prefixed message.
func readMessage(r io.Reader, nodes int) (message, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return message{}, err
	}
	size := binary.LittleEndian.Uint32(n[:])
	if size > maxMsg {
		return message{}, bad("length %d over the limit %d", size, maxMsg)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return message{}, err
	}
	return decodeMessage(b, nodes)
}
