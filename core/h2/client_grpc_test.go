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
