package main

// End-to-end tests of gRPC through spliced: grpc-go clients and servers
// (grpc's own interop test service), the real binary configured through
// its API, servers with proto h2 (h2c, and h2 over TLS by ALPN), clients
// on an h2c bind and on a TLS bind (ALPN h2).

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// grpcOrigin is a grpc-go server of the interop TestService that names
// itself in the x-server header and x-trailer trailer of every call and
// reports what its calls saw:
//   - UnaryCall echoes the payload (response_size bytes of it when set),
//     fails with response_status when set (trailer x-detail); a payload
//     "deadline" answers with the time left before the call's deadline
//     (ms; "none" without one); "hang" waits for the call's end, reported
//     on ended;
//   - StreamingOutputCall sends one message per response_parameters
//     entry; with a payload "hold", the first one, then the rest once
//     hold is closed (or the call ended);
//   - StreamingInputCall sums the payload sizes;
//   - HalfDuplexCall reads every message, then sends them back;
//   - FullDuplexCall echoes each message; after a message "hang" it
//     waits for the call's end, reported on ended.
type grpcOrigin struct {
	testpb.UnimplementedTestServiceServer
	name  string
	port  int
	srv   *grpc.Server
	ended chan error // the context error of calls that hung until their end
	hold  chan struct{}
	once  sync.Once
}

func (o *grpcOrigin) tag(ctx context.Context) {
	grpc.SetHeader(ctx, metadata.Pairs("x-server", o.name))
	grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "t-"+o.name))
}

func (o *grpcOrigin) waitEnd(ctx context.Context) {
	<-ctx.Done()
	o.ended <- ctx.Err()
}

func (o *grpcOrigin) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	o.tag(ctx)
	body := req.GetPayload().GetBody()
	switch string(body) {
	case "deadline":
		left := "none"
		if dl, ok := ctx.Deadline(); ok {
			left = strconv.FormatInt(time.Until(dl).Milliseconds(), 10)
		}
		return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: []byte(left)}}, nil
	case "hang":
		o.waitEnd(ctx)
		return nil, ctx.Err()
	}
	if st := req.GetResponseStatus(); st != nil {
		grpc.SetTrailer(ctx, metadata.Pairs("x-detail", "why-"+o.name))
		return nil, status.Error(codes.Code(st.Code), st.Message)
	}
	if n := int(req.GetResponseSize()); n > 0 {
		body = bytes.Repeat([]byte{'r'}, n)
	}
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: body}}, nil
}

func (o *grpcOrigin) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
	o.tag(stream.Context())
	for i, p := range req.GetResponseParameters() {
		if i == 1 && string(req.GetPayload().GetBody()) == "hold" {
			select {
			case <-o.hold:
			case <-stream.Context().Done():
				return stream.Context().Err()
			}
		}
		body := bytes.Repeat([]byte{byte('a' + i%26)}, int(p.GetSize()))
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: body}}); err != nil {
			return err
		}
	}
	return nil
}

func (o *grpcOrigin) StreamingInputCall(stream grpc.ClientStreamingServer[testpb.StreamingInputCallRequest, testpb.StreamingInputCallResponse]) error {
	o.tag(stream.Context())
	sum := 0
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(sum)})
		}
		if err != nil {
			return err
		}
		sum += len(m.GetPayload().GetBody())
	}
}

func (o *grpcOrigin) HalfDuplexCall(stream grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	o.tag(stream.Context())
	var got []*testpb.Payload
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		got = append(got, m.GetPayload())
	}
	for _, p := range got {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: p}); err != nil {
			return err
		}
	}
	return nil
}

func (o *grpcOrigin) FullDuplexCall(stream grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	o.tag(stream.Context())
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: m.GetPayload()}); err != nil {
			return err
		}
		if string(m.GetPayload().GetBody()) == "hang" {
			o.waitEnd(stream.Context())
			return stream.Context().Err()
		}
	}
}

// startGRPCOrigin serves a grpcOrigin on 127.0.0.1: h2c, or TLS with
// cert (grpc-go's TLS offers and requires ALPN h2).
func startGRPCOrigin(t *testing.T, name string, cert *testutil.Cert) *grpcOrigin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &grpcOrigin{name: name, port: ln.Addr().(*net.TCPAddr).Port, ended: make(chan error, 16), hold: make(chan struct{})}
	var opts []grpc.ServerOption
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert.TLS()}})))
	}
	o.srv = grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(o.srv, o)
	go o.srv.Serve(ln)
	t.Cleanup(func() { o.release(); o.srv.Stop() })
	return o
}

// release lets the held calls go on.
func (o *grpcOrigin) release() { o.once.Do(func() { close(o.hold) }) }

// grpcDial is a TestService client of addr: h2c, or TLS verified against
// cert for grpc.example.com.
func grpcDial(t *testing.T, addr string, cert *testutil.Cert) testpb.TestServiceClient {
	t.Helper()
	creds := insecure.NewCredentials()
	if cert != nil {
		creds = credentials.NewTLS(&tls.Config{RootCAs: cert.Pool(), ServerName: "grpc.example.com"})
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

// grpcCtx bounds a call (10 s: a loaded machine under -race).
func grpcCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// grpcServerOf is the x-server header of a call's metadata.
func grpcServerOf(md metadata.MD) string {
	if v := md.Get("x-server"); len(v) == 1 {
		return v[0]
	}
	return ""
}

// grpcBackend is the API body of http backend name with one proto h2
// server per origin (tls, when not nil, their tls section), checked over
// HTTP/2: a gRPC server answers the check's GET with 415, so 200-499.
func grpcBackend(name string, tlsSection map[string]any, origins ...*grpcOrigin) map[string]any {
	var servers []map[string]any
	for _, o := range origins {
		s := map[string]any{"name": o.name, "address": "127.0.0.1", "port": o.port, "proto": "h2"}
		if tlsSection != nil {
			s["tls"] = tlsSection
		}
		servers = append(servers, s)
	}
	return map[string]any{
		"name": name, "mode": "http", "balance": "roundrobin", "servers": servers,
		// fall 10: a check of a grpc-go origin in the test process under
		// -race, busy with a 19 MiB stream on a loaded machine, went
		// unanswered 500 ms three times in a row (TestGRPCHostileLoads):
		// no test here takes a server down by its check
		"health_check": map[string]any{"type": "http", "path": "/", "status_max": 499,
			"interval_ms": 500, "timeout_ms": 500, "rise": 1, "fall": 10},
	}
}

// waitGRPCServersUp waits until every server of backend is up by its
// HTTP/2 check, with status L7OK 415 (what grpc-go answers a GET).
func waitGRPCServersUp(t *testing.T, in *instance, backend string) {
	t.Helper()
	var st struct {
		Backends []struct {
			Name    string `json:"name"`
			Servers []struct {
				Up    bool `json:"up"`
				Check *struct {
					Status string `json:"status"`
					Code   int    `json:"code"`
				} `json:"check"`
			} `json:"servers"`
		} `json:"backends"`
	}
	testutil.Eventually(t, 15*time.Second, func() bool {
		in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &st)
		for _, b := range st.Backends {
			if b.Name != backend {
				continue
			}
			for _, s := range b.Servers {
				if !s.Up || s.Check == nil || s.Check.Status != "L7OK" || s.Check.Code != 415 {
					return false
				}
			}
			return len(b.Servers) > 0
		}
		return false
	}, "the gRPC servers up by their HTTP/2 checks (L7OK 415)")
}

// TestGRPCEndToEnd: grpc-go calls of every kind through spliced, from an
// h2c bind and from a TLS bind (ALPN h2) to an h2c server, and from an
// h2c bind to a server spoken to over TLS (h2 by ALPN): unary (a 100 KiB
// request and a 100 KiB response, past the 64 KiB windows), server
// streaming, client streaming, bidirectional, a status with its message
// and trailer metadata, grpc-timeout reaching the server, a deadline that
// expires and a cancelled call, both seen by the server.
func TestGRPCEndToEnd(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	feCert := testutil.NewCert(t, testutil.CertSpec{Names: []string{"grpc.example.com"}})
	uploadCert(in, "grpc", feCert, false)
	ca := testutil.NewCert(t, testutil.CertSpec{Names: []string{"origin ca"}, CA: true})
	originCert := testutil.NewCert(t, testutil.CertSpec{Names: []string{"origin.test"}, Parent: ca})

	plain := startGRPCOrigin(t, "g1", nil)
	secure := startGRPCOrigin(t, "g2", originCert)
	in.MustDo(201, "POST", "/api/v1/backends", grpcBackend("h2c", nil, plain))
	in.MustDo(201, "POST", "/api/v1/backends", grpcBackend("h2tls",
		map[string]any{"verify": "required", "ca_pem": ca.CertPEM, "sni": "origin.test"}, secure))
	clear, tport, clear2 := testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "grpc", "mode": "http", "default_backend": "h2c",
		"binds": []map[string]any{
			{"name": "clear", "address": "127.0.0.1", "port": clear},
			{"name": "tls", "address": "127.0.0.1", "port": tport, "tls": map[string]any{"certificates": []string{"grpc"}}},
		},
	})
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "grpc-tls-origin", "mode": "http", "default_backend": "h2tls",
		"binds": []map[string]any{{"name": "clear", "address": "127.0.0.1", "port": clear2}},
	})
	waitGRPCServersUp(t, in, "h2c")
	waitGRPCServersUp(t, in, "h2tls")

	for _, path := range []struct {
		name   string
		addr   int
		cert   *testutil.Cert
		origin *grpcOrigin
	}{
		{"h2c bind to h2c server", clear, nil, plain},
		{"TLS bind to h2c server", tport, feCert, plain},
		{"h2c bind to TLS server", clear2, nil, secure},
	} {
		t.Run(path.name, func(t *testing.T) {
			c := grpcDial(t, "127.0.0.1:"+strconv.Itoa(path.addr), path.cert)
			grpcCalls(t, c, path.origin)
		})
	}
}

// grpcCalls makes every kind of call through c, served by o.
func grpcCalls(t *testing.T, c testpb.TestServiceClient, o *grpcOrigin) {
	t.Run("unary", func(t *testing.T) {
		var hdr, trl metadata.MD
		big := bytes.Repeat([]byte("q"), 100<<10)
		r, err := c.UnaryCall(grpcCtx(t), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: big}, ResponseSize: 100 << 10},
			grpc.Header(&hdr), grpc.Trailer(&trl))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetPayload().GetBody()) != 100<<10 || grpcServerOf(hdr) != o.name {
			t.Fatalf("response of %d bytes from %q", len(r.GetPayload().GetBody()), grpcServerOf(hdr))
		}
		if got := trl.Get("x-trailer"); len(got) != 1 || got[0] != "t-"+o.name {
			t.Fatalf("trailer x-trailer %q", got)
		}
	})
	t.Run("server streaming", func(t *testing.T) {
		sizes := []int32{1, 10, 70 << 10, 3, 0, 20 << 10}
		req := &testpb.StreamingOutputCallRequest{}
		for _, n := range sizes {
			req.ResponseParameters = append(req.ResponseParameters, &testpb.ResponseParameters{Size: n})
		}
		s, err := c.StreamingOutputCall(grpcCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range sizes {
			m, err := s.Recv()
			if err != nil || len(m.GetPayload().GetBody()) != int(n) {
				t.Fatalf("message %d: %v (%d bytes, want %d)", i, err, len(m.GetPayload().GetBody()), n)
			}
		}
		if _, err := s.Recv(); err != io.EOF {
			t.Fatalf("after the last message: %v", err)
		}
		if got := s.Trailer().Get("x-trailer"); len(got) != 1 || got[0] != "t-"+o.name {
			t.Fatalf("trailer x-trailer %q", got)
		}
	})
	t.Run("client streaming", func(t *testing.T) {
		s, err := c.StreamingInputCall(grpcCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for i := range 20 {
			n := 1 + i*997
			want += n
			if err := s.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, n)}}); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
		r, err := s.CloseAndRecv()
		if err != nil || int(r.GetAggregatedPayloadSize()) != want {
			t.Fatalf("aggregated %d, %v; want %d", r.GetAggregatedPayloadSize(), err, want)
		}
	})
	t.Run("bidirectional, half duplex", func(t *testing.T) {
		// The server reads every request, then streams its answers.
		s, err := c.HalfDuplexCall(grpcCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		body := func(i int) []byte { return []byte("half-" + strconv.Itoa(i) + strings.Repeat(".", i*3000)) }
		for i := range 10 {
			if err := s.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: body(i)}}); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			m, err := s.Recv()
			if err != nil || !bytes.Equal(m.GetPayload().GetBody(), body(i)) {
				t.Fatalf("answer %d: %v", i, err)
			}
		}
		if _, err := s.Recv(); err != io.EOF {
			t.Fatalf("after the last answer: %v", err)
		}
		if got := s.Trailer().Get("x-trailer"); len(got) != 1 || got[0] != "t-"+o.name {
			t.Fatalf("trailer x-trailer %q", got)
		}
	})
	t.Run("bidirectional, full duplex", func(t *testing.T) {
		// Both ways at once: the requests stream in while the echoes
		// stream out, the last request sent before the first echo is read.
		s, err := c.FullDuplexCall(grpcCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		body := func(i int) []byte { return []byte("msg-" + strconv.Itoa(i) + strings.Repeat(".", i*1000)) }
		for i := range 10 {
			if err := s.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: body(i)}}); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			m, err := s.Recv()
			if err != nil || !bytes.Equal(m.GetPayload().GetBody(), body(i)) {
				t.Fatalf("echo %d: %v", i, err)
			}
		}
		if _, err := s.Recv(); err != io.EOF {
			t.Fatalf("after the last echo: %v", err)
		}
	})
	t.Run("bidirectional ping-pong", func(t *testing.T) {
		// Each request waits for the previous answer: request DATA must
		// be forwarded after the response started.
		s, err := c.FullDuplexCall(grpcCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			body := []byte("ping-" + strconv.Itoa(i) + strings.Repeat(".", i*1000))
			if err := s.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: body}}); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
			m, err := s.Recv()
			if err != nil || !bytes.Equal(m.GetPayload().GetBody(), body) {
				t.Fatalf("echo %d: %v", i, err)
			}
		}
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != io.EOF {
			t.Fatalf("after CloseSend: %v", err)
		}
	})
	t.Run("status, message and trailers", func(t *testing.T) {
		var trl metadata.MD
		msg := "not now: ünïcode & 100% sure"
		_, err := c.UnaryCall(grpcCtx(t), &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.FailedPrecondition), Message: msg}},
			grpc.Trailer(&trl))
		if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != msg {
			t.Fatalf("status %v %q, want FailedPrecondition %q", st.Code(), st.Message(), msg)
		}
		if got := trl.Get("x-detail"); len(got) != 1 || got[0] != "why-"+o.name {
			t.Fatalf("trailer x-detail %q", got)
		}
	})
	t.Run("grpc-timeout reaches the server", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("deadline")}})
		if err != nil {
			t.Fatal(err)
		}
		left, err := strconv.Atoi(string(r.GetPayload().GetBody()))
		if err != nil || left <= 0 || left > 5000 {
			t.Fatalf("the server's deadline: %q ms left, want 0 < left <= 5000", r.GetPayload().GetBody())
		}
	})
	t.Run("deadline expires", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("hang")}})
		switch st := status.Convert(err); {
		case st.Code() == codes.DeadlineExceeded:
		case st.Code() == codes.Unavailable && strings.Contains(st.Message(), "502"):
			// grpc-go's server resets the stream (CANCEL) when its own
			// copy of the deadline fires, at about the client's time;
			// when that reset reaches spliced first, the stream has no
			// response head yet and the client gets a 502.
			t.Logf("the server's reset came first: %v", err)
		default:
			t.Fatalf("a call past its deadline: %v", err)
		}
		grpcWaitEnded(t, o)
	})
	t.Run("cancelled call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, err := c.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte("hang")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil { // the server has the call
			t.Fatal(err)
		}
		cancel() // RST_STREAM CANCEL to spliced, which resets the server's stream
		grpcWaitEnded(t, o)
		if _, err := s.Recv(); status.Code(err) != codes.Canceled {
			t.Fatalf("the cancelled call: %v", err)
		}
	})
}

// grpcWaitEnded waits for o to report that a hanging call ended (its
// context done: the client's RST_STREAM, or its deadline, reached it).
func grpcWaitEnded(t *testing.T, o *grpcOrigin) {
	t.Helper()
	select {
	case err := <-o.ended:
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the server's call ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not see the call end")
	}
}

// TestGRPCServerGoesAway: a server of two stops gracefully (grpc-go's
// GracefulStop: GOAWAY, then it waits for its calls under way) while a
// server-streaming call it serves is under way, from an h2c bind and from
// a TLS bind. The call under way completes, with its trailers; every call
// made meanwhile and after succeeds (a stream the stopping server did not
// take is sent again elsewhere), and once it has stopped, all are served
// by the other server.
func TestGRPCServerGoesAway(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	feCert := testutil.NewCert(t, testutil.CertSpec{Names: []string{"grpc.example.com"}})
	uploadCert(in, "grpc", feCert, false)
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"h2c bind", false}, {"TLS bind", true}} {
		t.Run(tc.name, func(t *testing.T) {
			name := "away-" + map[bool]string{false: "clear", true: "tls"}[tc.tls]
			a, b := startGRPCOrigin(t, "a", nil), startGRPCOrigin(t, "b", nil)
			byName := map[string]*grpcOrigin{"a": a, "b": b}
			in.MustDo(201, "POST", "/api/v1/backends", grpcBackend(name, nil, a, b))
			port := testutil.FreePort(t)
			bind := map[string]any{"name": "b1", "address": "127.0.0.1", "port": port}
			var cert *testutil.Cert
			if tc.tls {
				bind["tls"] = map[string]any{"certificates": []string{"grpc"}}
				cert = feCert
			}
			in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
				"name": name, "mode": "http", "default_backend": name, "binds": []map[string]any{bind},
			})
			waitGRPCServersUp(t, in, name)
			c := grpcDial(t, "127.0.0.1:"+strconv.Itoa(port), cert)
			unary := func() string {
				t.Helper()
				var hdr metadata.MD
				if _, err := c.UnaryCall(grpcCtx(t), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("x")}}, grpc.Header(&hdr)); err != nil {
					t.Fatalf("unary call: %v", err)
				}
				return grpcServerOf(hdr)
			}
			seen := map[string]bool{}
			for range 4 { // round robin: both servers have a pooled connection
				seen[unary()] = true
			}
			if !seen["a"] || !seen["b"] {
				t.Fatalf("servers used: %v", seen)
			}

			held, err := c.StreamingOutputCall(grpcCtx(t), &testpb.StreamingOutputCallRequest{
				Payload:            &testpb.Payload{Body: []byte("hold")},
				ResponseParameters: []*testpb.ResponseParameters{{Size: 10}, {Size: 20}, {Size: 30}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := held.Recv(); err != nil {
				t.Fatal(err)
			}
			hdr, err := held.Header()
			if err != nil {
				t.Fatal(err)
			}
			victim := byName[grpcServerOf(hdr)]
			if victim == nil {
				t.Fatalf("the held call's server: %v", hdr)
			}
			other := b
			if victim == b {
				other = a
			}
			stopped := make(chan struct{})
			go func() { victim.srv.GracefulStop(); close(stopped) }()
			// Calls while the victim drains: each succeeds, wherever it runs.
			for range 10 {
				unary()
			}
			victim.release()
			for i, n := range []int{20, 30} {
				m, err := held.Recv()
				if err != nil || len(m.GetPayload().GetBody()) != n {
					t.Fatalf("the held call's message %d: %v", i+1, err)
				}
			}
			if _, err := held.Recv(); err != io.EOF {
				t.Fatalf("the held call's end: %v", err)
			}
			if got := held.Trailer().Get("x-trailer"); len(got) != 1 || got[0] != "t-"+victim.name {
				t.Fatalf("the held call's trailer %q", got)
			}
			select {
			case <-stopped:
			case <-time.After(10 * time.Second):
				t.Fatal("GracefulStop did not return: a call of the victim still runs")
			}
			for i := range 6 {
				if s := unary(); s != other.name {
					t.Fatalf("call %d after the stop served by %q, want %q", i, s, other.name)
				}
			}
		})
	}
}
