package proxy

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// payloadOf is the chunk data a well-formed chunked body prefix carries,
// the data of a chunk cut short included.
func payloadOf(s string) string {
	var out strings.Builder
	for {
		i := strings.Index(s, "\r\n")
		if i < 0 {
			return out.String()
		}
		line := s[:i]
		if j := strings.IndexByte(line, ';'); j >= 0 {
			line = line[:j]
		}
		n, err := strconv.ParseInt(line, 16, 64)
		if err != nil || n == 0 {
			return out.String()
		}
		s = s[i+2:]
		if int64(len(s)) <= n {
			out.WriteString(s)
			return out.String()
		}
		out.WriteString(s[:n])
		s = s[n:]
		if len(s) < 2 {
			return out.String()
		}
		s = s[2:]
	}
}

// TestChunkedResponseDechunkedForHTTP10: an HTTP/1.0 client cannot read
// chunked framing (RFC 9112 §6.1): it gets the chunk data only, without
// Transfer-Encoding or Trailer, delimited by the close (Connection: close),
// trailers dropped. An HTTP/1.1 client gets the bytes as the server sent
// them and keeps its connection. Each part is written only once the client
// got the data of the ones before: the proxy reads them separately.
func TestChunkedResponseDechunkedForHTTP10(t *testing.T) {
	const srvHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\nX-A: 1\r\n\r\n"
	long := strings.Repeat("z", 3000)
	cases := []struct {
		name  string
		parts []string
	}{
		{"one read", []string{"5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n"}},
		{"extensions and trailers", []string{"5;a=b;c=\"d e\"\r\nhello\r\n1;x\r\n!\r\n0;end=1\r\nX-T: 1\r\nX-U: 2\r\n\r\n"}},
		{"chunk split in its data", []string{"a\r\n01234", "56789\r\n0\r\n\r\n"}},
		{"size line split", []string{"3\r\nabc\r\n1", "0\r\n0123456789abcdef\r\n0\r\n\r\n"}},
		{"split everywhere", []string{"5\r\nh", "el", "lo\r", "\n6;e", "=1\r\n world\r", "\n0\r\nX-T", ": 1\r\n\r\n"}},
		{"many tiny chunks", []string{strings.Repeat("1\r\nx\r\n", 1000) + "0\r\n\r\n"}},
		{"long then tiny", []string{"bb8\r\n" + long + "\r\n" + strings.Repeat("2\r\nyz\r\n", 300), "0\r\n\r\n"}},
	}
	e := newEnv(t, defaultTuning())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := strings.Join(tc.parts, "")
			for _, req := range []string{"GET / HTTP/1.0\r\n\r\n", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\n\r\n"} {
				step := make(chan struct{})
				o := testutil.ServeOrigin(t, func(c *net.TCPConn) {
					defer c.Close()
					br := bufio.NewReader(c)
					if _, err := readHead(br); err != nil {
						return
					}
					c.Write([]byte(srvHead + tc.parts[0]))
					for _, p := range tc.parts[1:] {
						<-step
						c.Write([]byte(p))
					}
					if _, err := readHead(br); err != nil {
						return
					}
					c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
				}).Addr
				fe := httpFrontend(t, nil, o)
				c := e.dialHTTP(fe)
				io.WriteString(c, req)
				v10 := strings.Contains(req, "HTTP/1.0")
				want := srvHead + body
				if v10 {
					want = "HTTP/1.1 200 OK\r\nX-A: 1\r\nConnection: close\r\n\r\n" + payloadOf(body)
				}
				got := make([]byte, 0, len(want))
				sent := ""
				for i := range tc.parts {
					sent += tc.parts[i]
					n := len(want) - len(body) + len(sent) // 1.1: the bytes as sent
					if v10 {
						n = len(want) - len(payloadOf(body)) + len(payloadOf(sent))
					}
					for len(got) < n {
						b := make([]byte, n-len(got))
						k, err := c.Read(b)
						got = append(got, b[:k]...)
						if err != nil {
							t.Fatalf("%q: after %q: %v", req, got, err)
						}
					}
					if i+1 < len(tc.parts) {
						step <- struct{}{}
					}
				}
				if string(got) != want {
					t.Fatalf("%q: got\n%q\nwant\n%q", req, got, want)
				}
				if v10 {
					if rest, err := io.ReadAll(c); err != nil || len(rest) > 0 {
						t.Fatalf("%q: after the body %q, %v; want the close", req, rest, err)
					}
				} else {
					io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
					resp, err := io.ReadAll(io.LimitReader(c, 38+2))
					if err != nil || !strings.HasSuffix(string(resp), "\r\n\r\nok") {
						t.Fatalf("1.1: next request on the connection: %q, %v", resp, err)
					}
				}
				c.Close()
			}
		})
	}
}
