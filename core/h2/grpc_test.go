package h2

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// rawCodec sends []byte messages as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

// TestGRPCClient: grpc-go's client against a Conn whose handler echoes
// messages and ends with grpc-status trailers: unary, bidirectional
// streaming, a cancelled call (RST_STREAM CANCEL reaches Reset).
func TestGRPCClient(t *testing.T) {
	s := startServer(t)
	cc, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	req := bytes.Repeat([]byte("grpc"), 50000)
	var resp []byte
	if err := cc.Invoke(ctx, "/echo.Echo/Unary", &req, &resp); err != nil || !bytes.Equal(resp, req) {
		t.Fatalf("unary: %v, %d bytes", err, len(resp))
	}

	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/echo.Echo/Bidi")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		msg := bytes.Repeat([]byte{byte('a' + i%26)}, 1000*i+1)
		if err := st.SendMsg(&msg); err != nil {
			t.Fatal(err)
		}
		var got []byte
		if err := st.RecvMsg(&got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("bidi message %d: %v", i, err)
		}
	}
	st.CloseSend()
	var end []byte
	if err := st.RecvMsg(&end); !errors.Is(err, io.EOF) {
		t.Fatalf("bidi end: %v", err)
	}

	cctx, ccancel := context.WithCancel(ctx)
	st, err = cc.NewStream(cctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/echo.Echo/Cancelled")
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("x")
	st.SendMsg(&msg)
	var got []byte
	st.RecvMsg(&got)
	ccancel()
	if err := st.RecvMsg(&got); status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled call: %v", err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, h := range s.hs {
			if h.resets.Load() > 0 {
				return true
			}
		}
		return false
	}, "the cancel never reached Handler.Reset")
}
