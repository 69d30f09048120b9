package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/core/tlsconf"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// chkH2Backend builds http backend "web" with one proto h2 server per port
// on 127.0.0.1 (tl, when not nil, their tls, with the client configs the
// engine would build).
func chkH2Backend(t testing.TB, hc config.HealthCheck, port int) *balance.Backend {
	t.Helper()
	return chkH2BackendTLS(t, hc, nil, port)
}

func chkH2BackendTLS(t testing.TB, hc config.HealthCheck, tl *config.ServerTLS, port int) *balance.Backend {
	t.Helper()
	cb := &config.Backend{Name: "web", Mode: config.ModeHTTP, HealthCheck: &hc,
		Servers: []*config.Server{{Name: "s1", Address: "127.0.0.1", Port: port, Proto: config.ProtoH2, TLS: tl}}}
	b := chkBuild(t, cb, nil)
	if tl != nil {
		var err error
		if b.Servers[0].TLS, err = tlsconf.Client(cb.Servers[0]); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// chkH2Frames returns what write writes with an http2.Framer.
func chkH2Frames(t testing.TB, write func(fr *http2.Framer)) []byte {
	t.Helper()
	var buf bytes.Buffer
	write(http2.NewFramer(&buf, nil))
	return buf.Bytes()
}

// chkH2Block HPACK-encodes fields given as name, value pairs.
func chkH2Block(kv ...string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for i := 0; i < len(kv); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return buf.Bytes()
}

// chkH2Answer is a server's whole answer to a check: SETTINGS, then
// :status 200 on stream 1.
func chkH2Answer(t testing.TB) []byte {
	return chkH2Frames(t, func(fr *http2.Framer) {
		fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 100})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: chkH2Block(":status", "200"), EndHeaders: true, EndStream: true})
	})
}

// TestCheckH2StatusDecoding: every status 100-599 is read from the HPACK
// forms a server may send it in: the static entries, literals with the
// name indexed or literal, the value raw or Huffman-coded, after dynamic
// table size updates; what is not a :status first is refused.
func TestCheckH2StatusDecoding(t *testing.T) {
	lit := func(first byte, name string, value string, huff bool) []byte {
		b := []byte{first}
		if name != "" {
			b = append(b, byte(len(name)))
			b = append(b, name...)
		}
		if huff {
			h := hpack.AppendHuffmanString(nil, value)
			b = append(b, 0x80|byte(len(h)))
			return append(b, h...)
		}
		b = append(b, byte(len(value)))
		return append(b, value...)
	}
	for st := 100; st <= 599; st++ {
		v := strconv.Itoa(st)
		forms := map[string][]byte{
			"encoder":                  chkH2Block(":status", v),
			"incremental, raw":         lit(0x48, "", v, false),
			"incremental, huffman":     lit(0x48, "", v, true),
			"without indexing, raw":    lit(0x08, "", v, false),
			"never indexed, huffman":   lit(0x1e, "", v, true), // name index 14 (:status 500)
			"literal name, raw":        lit(0x40, ":status", v, false),
			"after table size updates": append([]byte{0x20, 0x3f, 0xe1, 0x1f}, lit(0x48, "", v, true)...),
		}
		h := hpack.AppendHuffmanString(nil, ":status")
		forms["literal name, huffman"] = append(append([]byte{0x40, 0x80 | byte(len(h))}, h...), lit(0, "", v, true)[1:]...)
		for name, b := range forms {
			if got, ok := checkH2Status(b); !ok || got != st {
				t.Fatalf("%d %s (% x): %d %v", st, name, b, got, ok)
			}
		}
	}
	for i, st := range []int{200, 204, 206, 304, 400, 404, 500} {
		if got, ok := checkH2Status([]byte{0x88 + byte(i)}); !ok || got != st {
			t.Errorf("static index %d: %d %v", 8+i, got, ok)
		}
	}
	for name, b := range map[string][]byte{
		"empty":                   nil,
		"only a size update":      {0x3f, 0xe1, 0x1f},
		":method first":           {0x82},
		"dynamic index":           {0xbe},
		"another name":            lit(0x40, "server", "200", false),
		"status of two digits":    lit(0x48, "", "20", false),
		"status 600":              lit(0x48, "", "600", true),
		"not digits":              lit(0x48, "", "2a0", false),
		"cut short":               lit(0x48, "", "200", false)[:4],
		"huffman padding of zero": {0x48, 0x82, 0x10, 0x00}, // "20" then 0-bits
		"huffman not a digit":     lit(0x48, "", "abc", true),
	} {
		if got, ok := checkH2Status(b); ok {
			t.Errorf("%s (% x): accepted as %d", name, b, got)
		}
	}
}

// TestCheckH2Reader: the answer is read through the frames a server may
// send before and around it, whole or a byte at a time; what is not
// HTTP/2, or resets or refuses the stream, fails with its reason.
func TestCheckH2Reader(t *testing.T) {
	settings := func(fr *http2.Framer) {
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	}
	status := func(s string) []byte {
		return chkH2Block(":status", s, "content-type", "text/plain", "date", "Mon, 07 Dec 2026 07:00:00 GMT")
	}
	tests := []struct {
		name  string
		write func(fr *http2.Framer)
		raw   []byte // instead of write
		res   uint8
		val   int
	}{
		{name: "status 200", write: func(fr *http2.Framer) {
			settings(fr)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: status("200"), EndHeaders: true})
		}, res: resStatus, val: 200},
		{name: "frames of the connection first", write: func(fr *http2.Framer) {
			settings(fr)
			fr.WriteWindowUpdate(0, 1<<20)
			fr.WriteSettingsAck()
			fr.WritePing(false, [8]byte{1})
			fr.WriteRawFrame(0xfa, 0, 0, []byte("an extension frame"))
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: status("503"), EndHeaders: true})
		}, res: resStatus, val: 503},
		{name: "padded, with priority, in CONTINUATIONs", write: func(fr *http2.Framer) {
			settings(fr)
			blk := status("418")
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:1], PadLength: 7,
				Priority: http2.PriorityParam{StreamDep: 0, Weight: 15}})
			fr.WriteContinuation(1, false, blk[1:3])
			fr.WriteContinuation(1, true, blk[3:])
		}, res: resStatus, val: 418},
		{name: "interim 103 then 204", write: func(fr *http2.Framer) {
			settings(fr)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: chkH2Block(":status", "103", "link", "</a.css>"), EndHeaders: true})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: chkH2Block(":status", "204"), EndHeaders: true, EndStream: true})
		}, res: resStatus, val: 204},
		{name: "graceful GOAWAY covering the stream", write: func(fr *http2.Framer) {
			settings(fr)
			fr.WriteGoAway(1<<31-1, http2.ErrCodeNo, nil)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: status("200"), EndHeaders: true})
		}, res: resStatus, val: 200},
		{name: "GOAWAY before the stream", write: func(fr *http2.Framer) {
			settings(fr)
			fr.WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte("bye"))
		}, res: resH2GoAway, val: int(http2.ErrCodeEnhanceYourCalm)},
		{name: "stream refused", write: func(fr *http2.Framer) {
			settings(fr)
			fr.WriteRSTStream(1, http2.ErrCodeRefusedStream)
		}, res: resH2Reset, val: int(http2.ErrCodeRefusedStream)},
		{name: "an HTTP/1.1 server", raw: []byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"), res: resH2, val: h2ChkNotH2},
		{name: "HEADERS before SETTINGS", write: func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: status("200"), EndHeaders: true})
		}, res: resH2, val: h2ChkNotH2},
		{name: "SETTINGS ACK first", write: func(fr *http2.Framer) { fr.WriteSettingsAck() }, res: resH2, val: h2ChkNotH2},
		{name: "frame above our max frame size", write: func(fr *http2.Framer) {
			settings(fr)
			fr.WriteData(3, false, make([]byte, h2CheckMaxFrame+1))
		}, res: resH2, val: h2ChkProtocol},
		{name: "header block interrupted", write: func(fr *http2.Framer) {
			settings(fr)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: status("200")[:1]})
			fr.WritePing(false, [8]byte{})
		}, res: resH2, val: h2ChkProtocol},
		{name: "CONTINUATION without HEADERS", write: func(fr *http2.Framer) {
			settings(fr)
			fr.WriteContinuation(1, true, status("200"))
		}, res: resH2, val: h2ChkProtocol},
		{name: "no :status first", write: func(fr *http2.Framer) {
			settings(fr)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: chkH2Block("content-type", "text/plain", ":status", "200"), EndHeaders: true})
		}, res: resH2, val: h2ChkMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.raw
			if tc.write != nil {
				in = chkH2Frames(t, tc.write)
			}
			var r h2CheckReader
			for _, step := range []int{len(in), 1, 7} {
				r.reset()
				var done bool
				var res uint8
				var val int
				for off := 0; off < len(in) && !done; off += step {
					done, res, val = r.feed(in[off:min(off+step, len(in))])
				}
				if !done || res != tc.res || val != tc.val {
					t.Fatalf("fed %d bytes at a time: done %v res %d val %d, want res %d val %d", step, done, res, val, tc.res, tc.val)
				}
			}
		})
	}
}

// chkH2Origin records the requests of a server of chkServeH2.
type chkH2Origin struct {
	port int
	mu   sync.Mutex
	reqs []string // "PROTO METHOD HOST PATH UA"
}

// chkServeH2 serves status on 127.0.0.1 with net/http, as HTTP/2 (h2c
// with prior knowledge, or h2 by ALPN with cert) and HTTP/1.1, or only
// HTTP/1.1 (h1only), and records the requests.
func chkServeH2(t testing.TB, cert *testutil.Cert, h1only bool, status int) *chkH2Origin {
	t.Helper()
	o := &chkH2Origin{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.reqs = append(o.reqs, r.Proto+" "+r.Method+" "+r.Host+" "+r.URL.RequestURI()+" "+r.UserAgent())
		o.mu.Unlock()
		w.WriteHeader(status)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.port = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	switch {
	case cert != nil:
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert.TLS()}}
		srv.Protocols.SetHTTP2(!h1only)
	case !h1only:
		srv.Protocols.SetUnencryptedHTTP2(true) // h2c with prior knowledge
	}
	go func() {
		if cert != nil {
			srv.ServeTLS(ln, "", "")
		} else {
			srv.Serve(ln)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return o
}

func (o *chkH2Origin) first() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.reqs) == 0 {
		return ""
	}
	return o.reqs[0]
}

// TestCheckH2 runs http checks of proto h2 servers against real servers:
// an h2c server (net/http (h2c with prior knowledge)) up at 200, down at 503, its
// request an HTTP/2 one with the check's method, path and host; an
// HTTP/1.1-only server down ("not an HTTP/2 server"); over TLS, an h2
// server up, and one that does not select h2 by ALPN down at the
// handshake; a gRPC server answers 415 (no application/grpc), up with
// status_max 499.
func TestCheckH2(t *testing.T) {
	certs := newUpstreamCerts(t)
	ws := chkLoops(t, 1)
	h2ok := chkServeH2(t, nil, false, 200)
	h2down := chkServeH2(t, nil, false, 503)
	h1 := chkServeH2(t, nil, true, 200)
	tlsH2 := chkServeH2(t, certs.leaf, false, 200)
	tlsH1 := chkServeH2(t, certs.leaf, true, 200)

	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(gln)
	t.Cleanup(gs.Stop)
	grpcPort := gln.Addr().(*net.TCPAddr).Port

	verified := &config.ServerTLS{CAPEM: certs.ca.CertPEM, SNI: "origin.test"}
	hc := config.HealthCheck{Type: config.CheckHTTP, Method: "HEAD", Path: "/healthz?deep=1", IntervalMs: 50, TimeoutMs: 5000, Rise: 1, Fall: 1}
	upTo499 := hc
	upTo499.StatusMax = 499
	tcp := config.HealthCheck{Type: config.CheckTCP, IntervalMs: 50, TimeoutMs: 5000, Rise: 1, Fall: 1}
	for _, tc := range []struct {
		name   string
		hc     config.HealthCheck
		tl     *config.ServerTLS
		o      *chkH2Origin
		port   int
		up     bool
		last   string
		status string
		req    string // the request the origin saw
	}{
		{"h2c up", hc, nil, h2ok, 0, true, "status 200", stats.CheckL7OK, "HTTP/2.0 HEAD 127.0.0.1:%d /healthz?deep=1 spliced-check"},
		{"h2c down at 503", hc, nil, h2down, 0, false, "status 503", stats.CheckL7STS, "HTTP/2.0 HEAD"},
		{"an HTTP/1.1-only server", hc, nil, h1, 0, false, "not an HTTP/2 server (no SETTINGS frame first)", stats.CheckL7RSP, ""},
		{"h2 over TLS up", hc, verified, tlsH2, 0, true, "status 200", stats.CheckL7OK, "HTTP/2.0 HEAD origin.test:%d /healthz?deep=1 spliced-check"},
		{"TLS without h2", hc, verified, tlsH1, 0, false, "tls handshake: remote error: tls: no application protocol", stats.CheckL6RSP, ""},
		{"tcp check, TLS without h2", tcp, verified, tlsH1, 0, false, "tls handshake: remote error: tls: no application protocol", stats.CheckL6RSP, ""},
		{"a gRPC server", upTo499, nil, nil, grpcPort, true, "status 415", stats.CheckL7OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := tc.port
			if tc.o != nil {
				port = tc.o.port
			}
			b := chkH2BackendTLS(t, tc.hc, tc.tl, port)
			ck := NewChecker(b, ws, nil)
			ck.Start(nil)
			defer ck.Stop()
			testutil.Eventually(t, 15*time.Second, func() bool { return chkState(ck, "s1").Runs >= 2 }, "two probes")
			st := chkState(ck, "s1")
			if b.Servers[0].Up() != tc.up || !strings.HasPrefix(st.Last, tc.last) || st.Status != tc.status {
				t.Errorf("up=%v last=%q status %s, want up=%v last=%q %s", b.Servers[0].Up(), st.Last, st.Status, tc.up, tc.last, tc.status)
			}
			if tc.req != "" {
				want := strings.Replace(tc.req, "%d", strconv.Itoa(port), 1)
				if got := tc.o.first(); !strings.HasPrefix(got, want) {
					t.Errorf("the origin saw %q, want %q", got, want)
				}
			}
		})
	}
}
