package proxy

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net/netip"
	"os"
	"sync/atomic"
	"time"
)

// TLS termination on binds
//
// A frontend generation with TLS set (the engine sets it per bind: each
// bind with a `tls` section gets its own copy of the frontend, so a plain
// and a TLS bind of one frontend share everything else) terminates TLS on
// every connection accepted through it (Accept):
//
//   - the accepted fd gets a tlsSock (xprt_tls.go) and its server
//     handshake starts on the worker's handshake pool, within
//     HandshakeTimeout (the frontend's timeouts.handshake_ms), waiting in
//     the pool's queue included; the pool bounds the handshakes computing
//     per loop, and one waiting for its client (half a ClientHello, a
//     silent client) is parked in the runtime poller with no slot, so
//     stalling clients delay no one;
//   - established: the tcp tunnel (startTCP) or the http connection
//     (startHTTP) starts over that transport, exactly as over a raw
//     socket; crypto/tls may have read the first client bytes with the
//     end of the handshake, so the client side starts readable. Nothing
//     above the transport knows it is TLS, except http mode's
//     X-Forwarded-Proto (https) and the client-certificate fields below;
//     no goroutine is left: records are read and written on the loop;
//   - failed (garbage, a protocol version or cipher refused, no client
//     certificate where one is required, the deadline): the fd is closed
//     (an RST) by the pool;
//   - plain HTTP sent to a TLS bind of an http frontend (the first bytes
//     are an HTTP method, not a TLS record): the helper goroutine answers
//     400 "The plain HTTP request was sent to HTTPS port" (nginx's 497)
//     within the handshake deadline, shuts its write side and reads what
//     the client still sends until it closes, so that the answer is not
//     destroyed by an RST; tcp frontends just close.
//
// The connection holds its maxconn slots (the engine's OnClose gives them
// back) from accept: a handshake that fails, times out, or is cut by a
// stop (errTLSStopped) runs OnClose too. A connection in its handshake
// counts in the loop's connections (Activity.Conns, what a draining loop
// waits for), and in the frontend's counters only once established
// (ConnTotal, ConnCur); the handshakes themselves are counted per
// frontend: full, resumed (session ticket), failed, of which timeouts.
//
// Renegotiation: crypto/tls's server never renegotiates and TLS 1.3 has
// none: a TLS 1.2 client's new ClientHello on an established connection
// fails the read (crypto/tls queues an unexpected_message alert), which
// aborts the connection: the client reads a reset
// (TestTLSRenegotiationRefusedEndToEnd).
//
// Client certificates (mTLS, http mode, CertHeader set): the fields
// <prefix>Subject, <prefix>Issuer, <prefix>SHA256 (of the leaf, hex) and
// <prefix>Verified (SUCCESS, or NONE without a certificate) are computed
// once after the handshake and added to every request of the connection;
// whatever field the client sent with that prefix (any case, '_' for
// '-' too: http1.AppendEndToEndStrip) is dropped, so that a
// client cannot forge them — on every bind of the frontend, plain ones
// included (Frontend.CertStrip): the servers cannot tell the binds apart.

// defaultHandshakeTimeout bounds a handshake whose frontend gives none: a
// helper goroutine must never wait forever.
const defaultHandshakeTimeout = 5 * time.Second

// Accept takes ownership of a client fd accepted on a bind whose current
// frontend is fe (cur is the bind's pointer to it, for http connections:
// StartHTTP) and starts what fe asks for: the PROXY header (proxyhdr.go),
// TLS termination, then an http connection or a tcp tunnel. Loop thread
// only.
func (w *Worker) Accept(fd int, fe *Frontend, cur *atomic.Pointer[Frontend]) {
	if fe.AcceptProxy != nil {
		w.readProxy(fd, fe, cur)
		return
	}
	w.accepted(fd, fe, cur, 0)
}

// AcceptFrom is Accept with the client's address as accept4 gave it
// (peer; the zero AddrPort: unknown): what starts at once (a plain http
// connection or tcp tunnel) takes it instead of a getpeername (clientAddr).
// What starts later (after a TLS handshake or a PROXY header) asks the
// socket then. Loop thread only.
func (w *Worker) AcceptFrom(fd int, peer netip.AddrPort, fe *Frontend, cur *atomic.Pointer[Frontend]) {
	if peer.IsValid() {
		w.accFd, w.accPeer = fd, peer
	}
	w.Accept(fd, fe, cur)
	w.accFd = -1
}

// accepted is Accept after the PROXY header, if any: pp is what it
// carried (proxyhdr.go; 0 = nothing, the peer is the client).
func (w *Worker) accepted(fd int, fe *Frontend, cur *atomic.Pointer[Frontend], pp uint32) {
	if fe.Limits != nil && len(fe.Limits.conn) > 0 && !w.limitConn(fd, fe, pp) {
		return // over a per-client connection limit: closed (limits.go)
	}
	switch {
	case fe.TLS != nil:
		w.startTLS(fd, fe, cur, pp)
	case fe.HTTP != nil:
		w.startHTTP(fd, plainTransport(), fe, cur, pp)
	default:
		w.startTCP(fd, plainTransport(), fe, pp)
	}
}

// startTLS runs the server handshake of fd on the worker's pool, then
// starts the connection over the TLS transport (see above).
func (w *Worker) startTLS(fd int, fe *Frontend, cur *atomic.Pointer[Frontend], pp uint32) {
	x := newTLSServer(fd, fe.TLS)
	x.plainHTTP = fe.HTTP != nil
	fs := fe.Stats.Loop(w.id)
	act := w.act
	act.Conns.Add(1)
	hold, hgen := w.limitHoldOf(fd) // given back if the handshake fails (limits.go)
	timeout := fe.HandshakeTimeout
	if timeout <= 0 {
		timeout = defaultHandshakeTimeout
	}
	w.tls.start(x, timeout, func(x *tlsSock, err error) {
		// On errTLSStopped this may run on the helper goroutine: only
		// atomics (counters, the engine's slots) are touched then.
		act.Conns.Add(-1)
		if err != nil {
			if err != errTLSStopped {
				fs.TLSFailed.Add(1)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					fs.TLSTimeouts.Add(1)
				}
				if x.answered {
					fs.CountStatus(400) // nginx's 497, as http_responses 4xx
				}
			}
			if err != errTLSStopped {
				w.dropCarried(pp) // loop thread: the stop's case leaves it to the worker's end
				w.limitConnEndIf(fd, hold, hgen)
			}
			if fe.OnClose != nil {
				fe.OnClose(w.id)
			}
			return
		}
		st := x.c.ConnectionState()
		x.sni = st.ServerName
		if st.DidResume {
			fs.TLSResumed.Add(1)
		} else {
			fs.TLSFull.Add(1)
		}
		if fe.HTTP == nil {
			w.startTCP(fd, x, fe, pp)
			return
		}
		var cl *client
		if fe.HTTP.speaksH2() && (st.NegotiatedProtocol == "h2" || !fe.HTTP.speaksH1()) {
			if c := w.startH2(fd, x, fe, cur, pp, nil, 0); c != nil {
				cl = &c.client
			}
		} else if c := w.startHTTP(fd, x, fe, cur, pp); c != nil {
			cl = &c.client
		}
		// Set before the first request: the start only woke the tasklet.
		switch {
		case cl == nil:
		case fe.CertHeader != "":
			cl.cert = clientCertFields(fe.CertHeader, &st)
		case fe.AccessLog && len(st.PeerCertificates) > 0:
			// No fields for the server, the subject for the access log.
			cl.cert = &clientCert{subject: st.PeerCertificates[0].Subject.String()}
		}
		if cl != nil && fe.Limits != nil && fe.Limits.cert && len(st.PeerCertificates) > 0 {
			if cl.cert == nil {
				cl.cert = &clientCert{} // the key of limits by tls_client_cert only
			}
			cl.cert.setSum(sha256.Sum256(st.PeerCertificates[0].Raw))
		}
	})
}

// clientCert is what an http connection adds to each of its requests
// about the client's certificate (computed once, after the handshake).
type clientCert struct {
	strip  []byte // the fields' prefix: the client's fields with it are dropped
	prefix string // strip as a string: request trailers with it are refused
	// fields: "<prefix>Subject: …\r\n" … "<prefix>Verified: …\r\n"; nil
	// when the frontend adds none and only the access log wants subject.
	fields []byte
	// subject is the certificate's subject, for the access log ("" without
	// a certificate).
	subject string
	// sum is the SHA-256 of the certificate (DER) when hasSum: the key of
	// the limits by tls_client_cert (limits.go).
	sum    [32]byte
	hasSum bool
}

// clientCertFields builds the client-certificate fields of a connection.
func clientCertFields(prefix string, st *tls.ConnectionState) *clientCert {
	cc := &clientCert{strip: []byte(prefix), prefix: prefix}
	d := make([]byte, 0, 256)
	if len(st.PeerCertificates) == 0 {
		cc.fields = appendField(d, prefix, "Verified", "NONE")
		return cc
	}
	leaf := st.PeerCertificates[0]
	sum := sha256.Sum256(leaf.Raw)
	cc.subject = leaf.Subject.String()
	d = appendField(d, prefix, "Subject", cc.subject)
	d = appendField(d, prefix, "Issuer", leaf.Issuer.String())
	d = appendField(d, prefix, "SHA256", hex.EncodeToString(sum[:]))
	cc.fields = appendField(d, prefix, "Verified", verified(st))
	return cc
}

// verified is nginx's $ssl_client_verify for a connection with a client
// certificate: SUCCESS when crypto/tls verified its chain; a certificate
// accepted without verification (a config that asks for none) says NONE.
func verified(st *tls.ConnectionState) string {
	if len(st.VerifiedChains) > 0 {
		return "SUCCESS"
	}
	return "NONE"
}

// appendField appends "<prefix><name>: value\r\n"; bytes that may not
// appear in a field value (controls) become '?'.
func appendField(d []byte, prefix, name, value string) []byte {
	d = append(d, prefix...)
	d = append(d, name...)
	d = append(d, ": "...)
	for i := 0; i < len(value); i++ {
		b := value[i]
		if b < 0x20 && b != '\t' || b == 0x7f {
			b = '?'
		}
		d = append(d, b)
	}
	return append(d, "\r\n"...)
}

// serverName is the SNI the client sent (transport).
func (x *tlsSock) serverName() string { return x.sni }

// peerSubject is the subject of the client's certificate, "" without one
// (access log: once per connection, after the handshake).
func (x *tlsSock) peerSubject() string {
	if !x.a.loop {
		return ""
	}
	if pc := x.c.ConnectionState().PeerCertificates; len(pc) > 0 {
		return pc[0].Subject.String()
	}
	return ""
}

// plainHTTPAnswer is nginx's 497 as it reaches the client: a 400, not
// cacheable as every answer the proxy makes itself (http1.AppendError).
var plainHTTPAnswer = []byte("HTTP/1.1 400 Bad Request\r\n" +
	"Content-Type: text/plain\r\n" +
	"Content-Length: 46\r\n" +
	"Cache-Control: no-cache\r\n" +
	"Connection: close\r\n" +
	"\r\n" +
	"The plain HTTP request was sent to HTTPS port\n")

// looksHTTP: the first bytes of a connection (a record header, 5 bytes)
// start an HTTP/1 request line: an upper-case method, then a space.
func looksHTTP(h []byte) bool {
	n := 0
	for n < len(h) && 'A' <= h[n] && h[n] <= 'Z' {
		n++
	}
	return n >= 3 && (n == len(h) || h[n] == ' ')
}

// answerPlain runs on the helper goroutine when the handshake of an http
// frontend's connection failed: if the client spoke plain HTTP, it gets
// the 400 above, within the handshake deadline (see the top of this file).
func (x *tlsSock) answerPlain(err error) {
	var rh tls.RecordHeaderError
	if !errors.As(err, &rh) || rh.Conn == nil || !looksHTTP(rh.RecordHeader[:]) {
		return
	}
	if _, err := x.a.Write(plainHTTPAnswer); err != nil {
		return
	}
	x.answered = true
	if shutWrite(x.a.fd) != 0 {
		return
	}
	var b [512]byte
	for {
		if _, err := x.a.Read(b[:]); err != nil {
			return // end of stream, an error or the deadline
		}
	}
}
