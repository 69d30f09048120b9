package h2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"golang.org/x/net/http2/hpack"

	"github.com/spliced-proxy/spliced/core/http1"
)

// grpcFrame is a gRPC length-prefixed message (uncompressed).
func grpcFrame(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// grpcServer serves any method: /echo.Echo/Fail fails with NotFound
// (a trailers-only response), every other echoes each message.
func grpcServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}),
		grpc.UnknownServiceHandler(func(_ any, st grpc.ServerStream) error {
			if m, _ := grpc.MethodFromServerStream(st); m == "/echo.Echo/Fail" {
				return status.Error(codes.NotFound, "nope")
			}
			for {
				var msg []byte
				if err := st.RecvMsg(&msg); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
				if err := st.SendMsg(&msg); err != nil {
					return err
				}
			}
		}))
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

var grpcFields = []Field{
	{[]byte("Content-Type"), []byte("application/grpc")},
	{[]byte("TE"), []byte("trailers")},
}

// TestClientGRPC: a ClientConn against grpc-go's server: a unary call
// with a message larger than the stream window, a bidirectional stream
// of 20 messages each echoed before the next is sent, and a failing call
// whose grpc-status comes in a trailers-only response.
func TestClientGRPC(t *testing.T) {
	addr := grpcServer(t)
	nc, c, rec := dialClient(t, addr)

	msg := bytes.Repeat([]byte("grpc"), 50000)
	id, err := c.OpenStream("POST", addr, "/echo.Echo/Unary", grpcFields, false)
	if err != nil {
		t.Fatal(err)
	}
	rec.send(id, grpcFrame(msg), true)
	pump(t, nc, c, func() bool { return rec.done(id) })
	s := rec.s[id]
	if s.reset || s.heads[0] != 200 || !bytes.Equal(s.body, grpcFrame(msg)) || field(s.trail, "grpc-status") != "0" {
		t.Fatalf("unary: reset=%v heads %v, %d bytes, trailers %v", s.reset, s.heads, len(s.body), s.trail)
	}

	bidi, err := c.OpenStream("POST", addr, "/echo.Echo/Bidi", grpcFields, false)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := 0; i < 20; i++ {
		m := grpcFrame(bytes.Repeat([]byte{byte('a' + i)}, 1000*i+1))
		want = append(want, m...)
		rec.send(bidi, m, false)
		pump(t, nc, c, func() bool { return len(rec.s[bidi].body) == len(want) || rec.done(bidi) })
		if !bytes.Equal(rec.s[bidi].body, want) {
			t.Fatalf("bidi message %d: %d bytes", i, len(rec.s[bidi].body))
		}
	}
	rec.send(bidi, nil, true)
	pump(t, nc, c, func() bool { return rec.done(bidi) })
	if s := rec.s[bidi]; s.reset || field(s.trail, "grpc-status") != "0" {
		t.Fatalf("bidi end: reset=%v trailers %v", s.reset, s.trail)
	}

	fail, _ := c.OpenStream("POST", addr, "/echo.Echo/Fail", grpcFields, false)
	rec.send(fail, grpcFrame([]byte("x")), true)
	pump(t, nc, c, func() bool { return rec.done(fail) })
	if s := rec.s[fail]; s.reset || !s.ended || field(s.fields, "grpc-status") != "5" || field(s.fields, "grpc-message") != "nope" {
		t.Fatalf("fail: %+v", s)
	}
	if c.Streams() != 0 {
		t.Fatalf("%d streams left", c.Streams())
	}
}

// http1Rec converts each response to HTTP/1.1 bytes as the server-side
// transport will (AppendHTTP1Response, AppendChunk, AppendHTTP1Trailers).
type http1Rec struct {
	*clientRec
	out     map[uint32][]byte
	chunked map[uint32]bool
}

func (r *http1Rec) Response(id uint32, status int, f []hpack.HeaderField, end bool) {
	r.clientRec.Response(id, status, f, end)
	var ch bool
	r.out[id], ch = AppendHTTP1Response(r.out[id], status, f, !end)
	if status >= 200 {
		r.chunked[id] = ch
	}
}

func (r *http1Rec) Data(id uint32, p []byte, end bool) {
	r.clientRec.Data(id, p, end)
	if !r.chunked[id] {
		r.out[id] = append(r.out[id], p...)
		return
	}
	r.out[id] = AppendChunk(r.out[id], p)
	if end {
		r.out[id] = AppendHTTP1Trailers(r.out[id], nil)
	}
}

func (r *http1Rec) Trailers(id uint32, f []hpack.HeaderField) {
	r.clientRec.Trailers(id, f)
	r.out[id] = AppendHTTP1Trailers(r.out[id], f)
}

// TestClientGRPCAsHTTP1: a gRPC call whose request comes as an HTTP/1.1
// head (RequestHTTP1) and whose response is turned into HTTP/1.1 bytes,
// as the proxy's server-side transport will: core/http1 parses the head,
// the chunked body decodes to the gRPC message, and the trailer section
// carries grpc-status.
func TestClientGRPCAsHTTP1(t *testing.T) {
	addr := grpcServer(t)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	rec := &http1Rec{clientRec: newClientRec(), out: map[uint32][]byte{}, chunked: map[uint32]bool{}}
	c := NewClientConn(ClientConfig{}, rec)
	rec.c = c

	msg := grpcFrame(bytes.Repeat([]byte("m"), 100000))
	r, buf := parseHTTP1Req(t, "POST /echo.Echo/Unary HTTP/1.1\r\nHost: "+addr+
		"\r\nContent-Type: application/grpc\r\nTE: trailers\r\nTransfer-Encoding: chunked\r\n\r\n")
	id, err := c.RequestHTTP1(r, buf, false)
	if err != nil {
		t.Fatal(err)
	}
	rec.send(id, msg, true)
	pump(t, nc, c, func() bool { return rec.done(id) })

	out := rec.out[id]
	var resp http1.Response
	n, err := resp.Parse(out, http1.MethodPOST)
	if err != nil || n == 0 || resp.Status != 200 || resp.Body != http1.BodyChunked {
		t.Fatalf("head: %d %v status %d body %v\n%q", n, err, resp.Status, resp.Body, out[:min(len(out), 300)])
	}
	if ct, _ := resp.Get(out, "content-type"); string(ct) != "application/grpc" {
		t.Fatalf("content-type %q", ct)
	}
	var ch http1.Chunked
	var body []byte
	rest := out[n:]
	for len(rest) > 0 && !ch.Done() {
		k, d, err := ch.Decode(rest)
		if err != nil {
			t.Fatal(err)
		}
		body = append(body, rest[k-d:k]...)
		rest = rest[k:]
	}
	if !ch.Done() || len(rest) != 0 || !bytes.Equal(body, msg) {
		t.Fatalf("body: done %v, %d bytes left, %d bytes", ch.Done(), len(rest), len(body))
	}
	if !bytes.Contains(out[len(out)-40:], []byte("\r\n0\r\ngrpc-status: 0\r\n")) {
		t.Fatalf("trailers: %q", out[len(out)-40:])
	}
}
