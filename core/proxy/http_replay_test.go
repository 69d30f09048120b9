package proxy

import (
	"bufio"
	"bytes"
	"io"
	"math/rand"
	"net"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// writeBlock sends a header block as HEADERS then CONTINUATIONs of at
// most 16 KiB (the proxy's SETTINGS_MAX_FRAME_SIZE).
func writeBlock(fr *http2.Framer, id uint32, block []byte, endStream bool) {
	const max = 16384 // fragments
	first := block
	if len(first) > max {
		first = block[:max]
	}
	rest := block[len(first):]
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(rest) == 0, EndStream: endStream})
	for len(rest) > 0 {
		n := min(len(rest), max)
		fr.WriteContinuation(id, n == len(rest), rest[:n])
		rest = rest[n:]
	}
}

// noisy is n bytes that Huffman coding does not shrink much: an encoded
// block about as long as the list it carries.
func noisy(n int) string {
	r := rand.New(rand.NewSource(1))
	b := make([]byte, n)
	const set = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	for i := range b {
		b[i] = set[r.Intn(len(set))]
	}
	return string(b)
}

// TestNoReplayOnceTheServerBeganToAnswer: a request on a pooled server
// connection whose server began to answer it (an HTTP/2 server that sent
// a response head that is oversized, malformed or undecodable, or reset
// the stream itself; an HTTP/1.1 server that sent part of a head, then
// closed) is not sent again: the client gets a 502 at once, and the
// server saw the request once (a hostile server would else have it
// replayed retries+1 times, each costing what the first did). HAProxy
// answers 502 as well. Only a stream the server refused (REFUSED_STREAM,
// GOAWAY) or a connection that died with nothing said of the request
// replays (TestH2ServerGoAwayRetriesUnprocessedStreams,
// TestHTTPReplaysOnAPooledConnectionThatDies).
func TestNoReplayOnceTheServerBeganToAnswer(t *testing.T) {
	e := newEnv(t, defaultTuning())
	for _, tc := range []struct {
		name  string
		reply func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer, id uint32)
	}{
		{"head over the list size (a stream error)", func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer, id uint32) {
			enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			enc.WriteField(hpack.HeaderField{Name: "x-big", Value: noisy(24 << 10)})
			writeBlock(fr, id, hb.Bytes(), true)
		}},
		{"head block past twice the list size (a connection error)", func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer, id uint32) {
			enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			for i := 0; i < 8; i++ {
				enc.WriteField(hpack.HeaderField{Name: "x-big", Value: noisy(12 << 10)})
			}
			writeBlock(fr, id, hb.Bytes(), true)
		}},
		{"head without :status (malformed)", func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer, id uint32) {
			enc.WriteField(hpack.HeaderField{Name: "x-a", Value: "b"})
			writeBlock(fr, id, hb.Bytes(), true)
		}},
		{"head HPACK cannot decode (a connection error)", func(fr *http2.Framer, _ *hpack.Encoder, _ *bytes.Buffer, id uint32) {
			writeBlock(fr, id, []byte{0x80 | 70}, true) // indexed field 70: no such entry
		}},
		{"DATA before any head", func(fr *http2.Framer, _ *hpack.Encoder, _ *bytes.Buffer, id uint32) {
			fr.WriteData(id, true, []byte("no head"))
		}},
		{"RST_STREAM INTERNAL_ERROR", func(fr *http2.Framer, _ *hpack.Encoder, _ *bytes.Buffer, id uint32) {
			fr.WriteRSTStream(id, http2.ErrCodeInternal)
		}},
	} {
		t.Run("h2 "+tc.name, func(t *testing.T) {
			var requests atomic.Int32
			addr, _ := scriptedH2Origin(t, func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer, f http2.Frame, _ int32) bool {
				h, ok := f.(*http2.HeadersFrame)
				if !ok {
					return true
				}
				hb.Reset()
				if requests.Add(1) == 1 { // the first: answered, its connection pooled
					enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
					writeBlock(fr, h.StreamID, hb.Bytes(), true)
					return true
				}
				tc.reply(fr, enc, hb, h.StreamID)
				return true
			})
			fe := h2ServerFrontend(t, addr)
			if st := askStatus(t, e, fe, "GET /warm HTTP/1.1\r\nHost: a\r\n\r\n"); st != 200 {
				t.Fatalf("first request: %d", st)
			}
			if st := askStatus(t, e, fe, "GET /hit HTTP/1.1\r\nHost: a\r\n\r\n"); st != 502 {
				t.Fatalf("status %d, want 502", st)
			}
			if n := requests.Load(); n != 2 {
				t.Fatalf("the server saw %d requests, want 2: the one it began to answer was sent again", n)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		reset bool
	}{{"part of a head, then a close", false}, {"part of a head, then a reset", true}} {
		t.Run("h1 "+tc.name, func(t *testing.T) {
			var requests atomic.Int32
			addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if _, err := readHead(br); err != nil {
						return
					}
					if requests.Add(1) == 2 {
						io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Len")
						if tc.reset {
							c.SetLinger(0)
						}
						return
					}
					io.WriteString(c, rawResponse)
				}
			}).Addr
			fe := httpFrontend(t, nil, addr)
			c := e.dialHTTP(fe)
			defer c.Close()
			br := bufio.NewReader(c)
			if resp, _ := exchangeOn(t, c, br, "GET /warm HTTP/1.1\r\nHost: a\r\n\r\n", "GET"); resp.StatusCode != 200 {
				t.Fatalf("first request: %d", resp.StatusCode)
			}
			if resp, _ := exchangeOn(t, c, br, "GET /hit HTTP/1.1\r\nHost: a\r\n\r\n", "GET"); resp.StatusCode != 502 {
				t.Fatalf("status %d, want 502", resp.StatusCode)
			}
			if n := requests.Load(); n != 2 {
				t.Fatalf("the server saw %d requests, want 2", n)
			}
		})
	}
	e.waitIdle()
}
