package proxy

import (
	"strings"

	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/core/tlshello"
)

// SNI routing (tcp mode, without terminating TLS)
//
// A tcp frontend with SNI routes starts its tunnels in stInspect: the
// client is registered but no server is connected. Each read of the
// client goes into the c2s buffer (the tunnel's own, from the pool) and
// tlshello.Parse runs on everything read so far (it allocates nothing):
//   - ErrIncomplete: wait for more, at most the frontend's InspectTimeout
//     (handshake_ms) from accept, then close (counted as a frontend
//     timeout). A buffer full before Parse answers closes too: with the
//     default bufsize (16 KiB, below tlshello.MaxInspect) a ClientHello
//     whose records exceed it is refused; real ones are under 2 KiB;
//   - any other error (not TLS, such as plain HTTP, or a malformed hello)
//     or the client closing first: close with a reset, counted as a
//     frontend abort;
//   - a hello: the first route whose name matches its server name picks
//     the backend (exact, or "*.suffix" matching one or more labels before
//     ".suffix"), else the frontend's Backend (also for a hello without
//     SNI); then the tunnel connects as any other, and the buffered bytes
//     go to the server first, unchanged, before splicing takes over.
// Frontends without SNI routes skip all of this.

// SNIRoute sends connections whose ClientHello names a matching server to
// Backend (nil: the connection is closed, counted as no server).
type SNIRoute struct {
	name    []byte // lower case; for "*.suffix" the ".suffix" part
	suffix  bool
	Backend *Backend
}

// NewSNIRoute compiles a configured sni route (control path): an exact
// host name or "*.suffix".
func NewSNIRoute(sni string, be *Backend) SNIRoute {
	n := strings.ToLower(sni)
	r := SNIRoute{Backend: be}
	if strings.HasPrefix(n, "*.") {
		r.suffix = true
		n = n[1:]
	}
	r.name = []byte(n)
	return r
}

// match: name is the hello's server name (lower case, non-empty).
func (r *SNIRoute) match(name []byte) bool {
	if r.suffix {
		return len(name) > len(r.name) && string(name[len(name)-len(r.name):]) == string(r.name)
	}
	return string(name) == string(r.name)
}

// sniBackend picks the backend for a hello's server name (nil or empty:
// the default).
func sniBackend(fe *Frontend, name []byte) *Backend {
	if len(name) > 0 {
		for i := range fe.SNI {
			if fe.SNI[i].match(name) {
				return fe.SNI[i].Backend
			}
		}
	}
	return fe.Backend
}

// inspect reads what the client sent so far and parses it; on a hello it
// routes and connects (state stConnecting), on a refusal it closes, and
// otherwise it leaves the tunnel waiting in stInspect.
func (t *Tunnel) inspect() {
	d := &t.c2s
	for t.cli.canRecv() {
		_, r := d.fillBuf(t.w, &t.cli, &d.buf, nil)
		switch r {
		case rMoved:
		case rEmpty:
			return
		default: // EOF, an error, or a full buffer without an answer
			t.close(closeAbort)
			return
		}
		h, err := tlshello.Parse(d.buf.Data())
		if err == tlshello.ErrIncomplete {
			continue
		}
		if err != nil {
			t.close(closeAbort)
			return
		}
		t.be = sniBackend(t.fe, h.ServerName())
		t.w.L.Disarm(&t.timer)
		t.deadline = 0
		if t.rulesDeny(h.ServerName()) {
			return // a rule denied the connection (tunnel_rules.go)
		}
		if t.be == nil {
			t.close(closeNoServer)
			return
		}
		t.state = stConnecting
		t.useBackend(stats.Sec(t.w.L.Now()))
		t.acquire(nil)
		return
	}
}
