package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestHTTPBodiesPassUnchanged runs the byte mover through http mode: a
// 100 MiB Content-Length request body to the server, then a 100 MiB
// response body back, in each splice mode, with sha256 of what each end
// sent against what the other received, splice used exactly when the mode
// allows it, and every pipe back in the pool (TestMoverPassesBytesUnchanged
// moves the same without a mux, TestTunnelPassesBytesUnchanged through a
// tcp tunnel).
func TestHTTPBodiesPassUnchanged(t *testing.T) {
	size := int64(100 << 20)
	if testing.Short() {
		size = 8 << 20
	}
	cl := strconv.FormatInt(size, 10)
	for _, tc := range spliceCases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			srvRes := make(chan transfer, 1)
			addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
				defer c.Close()
				var r transfer
				br := bufio.NewReader(c)
				if _, r.err = readHead(br); r.err == nil {
					r.got, r.n, r.err = drain(io.LimitReader(br, size))
				}
				if r.err == nil {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+cl+"\r\n\r\n")
					r.sent, r.err = sendPattern(c, 2, size)
				}
				srvRes <- r
			}).Addr
			fe := httpFrontend(t, nil, addr)
			fe.Splice = tc.mode
			c := e.dialHTTP(fe)
			c.SetDeadline(time.Now().Add(60 * time.Second))
			sendErr := make(chan error, 1)
			var cliSent [32]byte
			go func() {
				_, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: "+cl+"\r\n\r\n")
				if err == nil {
					cliSent, err = sendPattern(c, 1, size)
				}
				sendErr <- err
			}()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			cliGot, cliN, err := drain(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-sendErr; err != nil {
				t.Fatalf("client send: %v", err)
			}
			sr := awaitTransfer(t, srvRes)
			sameBytes(t, "request body", size, sr.n, sr.got, cliSent)
			sameBytes(t, "response body", size, cliN, cliGot, sr.sent)
			c.Close()
			e.waitIdle()
			// The first bytes of a body (with its head) and its last
			// spliceMin bytes are copied: at least size-2*spliceMin of
			// each body is spliced.
			checkSpliced(t, e, tc.name, tc.wantSplice, uint64(2*(size-2*spliceMin)))
		})
	}
}

// TestHTTPBodyChunksDoNotAllocate pins zero heap allocations per 16 KiB
// chunk of an http body in steady state, request and response, buffered
// and spliced: the body's framing plugs into the mover without boxing
// (TestMoverDoesNotAllocate is the same without a mux).
func TestHTTPBodyChunksDoNotAllocate(t *testing.T) {
	const huge = "1099511627776" // 1 TiB: the body never ends during the test
	for _, mode := range []SpliceMode{SpliceOff, SpliceOn} {
		for _, dir := range []string{"request", "response"} {
			t.Run(modeName(mode)+"/"+dir, func(t *testing.T) {
				e := newEnv(t, defaultTuning())
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				fe := httpFrontend(t, nil, ln.Addr().(*net.TCPAddr))
				fe.Splice = mode
				c := e.dialHTTP(fe)
				req := "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
				if dir == "request" {
					req = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: " + huge + "\r\n\r\n"
				}
				if _, err := io.WriteString(c, req); err != nil {
					t.Fatal(err)
				}
				ac, err := ln.Accept()
				if err != nil {
					t.Fatal(err)
				}
				sc := ac.(*net.TCPConn)
				sc.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := readHead(bufio.NewReaderSize(sc, 16)); err != nil {
					t.Fatal(err)
				}
				from, to := c, sc
				if dir == "response" {
					io.WriteString(sc, "HTTP/1.1 200 OK\r\nContent-Length: "+huge+"\r\n\r\n")
					if _, err := readHead(bufio.NewReaderSize(c, 16)); err != nil {
						t.Fatal(err)
					}
					from, to = sc, c
				}
				// bufio.Reader may have read past the head: only the head
				// was sent so far, so nothing is lost.
				wfd, rfd := blockingFD(t, from), blockingFD(t, to)
				out := bytes.Repeat([]byte("x"), 16<<10)
				in := make([]byte, len(out))
				var ferr error
				allocs := testing.AllocsPerRun(200, func() {
					if err := writeFull(wfd, out); err != nil {
						ferr = err
					}
					if err := readFull(rfd, in); err != nil {
						ferr = err
					}
				})
				if ferr != nil {
					t.Fatal(ferr)
				}
				if allocs != 0 {
					t.Fatalf("%v allocations per 16 KiB chunk, want 0", allocs)
				}
				if spliced := e.l.Activity().SpliceBytes.Load(); (mode == SpliceOn) != (spliced > 0) {
					t.Fatalf("splice=%s: %d bytes spliced", modeName(mode), spliced)
				}
			})
		}
	}
}
