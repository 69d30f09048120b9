package h2_test

import (
	"bytes"
	"fmt"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spliced-proxy/spliced/core/h2"
)

// proxyStreams is what a loop's HTTP/2 mux would keep: per stream, the
// HTTP/1.1 request it writes to a server. Here the "server" answers at
// once.
type proxyStreams struct {
	c    *h2.Conn
	head []byte // the HTTP/1.1 head for the server, from a pool in a loop
}

func (p *proxyStreams) Headers(id uint32, r *h2.Request, end bool) {
	// route, pick a server, write the head to its connection...
	p.head = append(h2.AppendHTTP1(p.head[:0], r, !end), "x-forwarded-proto: https\r\n\r\n"...)
	fmt.Printf("to server: %q\n", p.head)
	if end {
		// ...and when the server's response head is parsed:
		p.c.Respond(id, 200, []h2.Field{{Name: []byte("Content-Type"), Value: []byte("text/plain")}}, false)
		// the body, as much as the windows take; the rest on WindowOpened
		taken := p.c.SendData(id, []byte("hello"), true)
		fmt.Println("body taken:", taken)
	}
}

// Data: write p to the server, then give the client its window back for
// what was written (here: all of it).
func (p *proxyStreams) Data(id uint32, b []byte, end bool)        { p.c.Consumed(id, len(b)) }
func (p *proxyStreams) Trailers(id uint32, f []hpack.HeaderField) {}
func (p *proxyStreams) Reset(id uint32, code http2.ErrCode)       { fmt.Println("reset", id, code) }
func (p *proxyStreams) WindowOpened(id uint32)                    {}

// Example shows the loop's side: bytes read from the socket go to Feed
// (a partial frame stays in the buffer for the next read), the Handler
// runs inside Feed, and Output is written to the socket and Drained.
func Example() {
	// what a client sends: the preface, SETTINGS, one GET
	var in bytes.Buffer
	in.WriteString(h2.Preface)
	fr := http2.NewFramer(&in, nil)
	fr.WriteSettings()
	var blk bytes.Buffer
	enc := hpack.NewEncoder(&blk)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":path", "/hi"}, {":authority", "example.com"}, {"cookie", "a=1"}, {"cookie", "b=2"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk.Bytes(), EndStream: true, EndHeaders: true})

	p := &proxyStreams{}
	c := h2.NewConn(h2.Config{}, p)
	p.c = c

	// the loop: read into buf (here: all of it in two reads), Feed,
	// keep what was not consumed
	var buf []byte
	wire := in.Bytes()
	for _, read := range [][]byte{wire[:30], wire[30:]} {
		buf = append(buf, read...)
		n, err := c.Feed(buf)
		if err != nil {
			fmt.Println("connection error:", err) // drain Output, then close
			return
		}
		buf = buf[:copy(buf, buf[n:])]
	}
	// on writable: write Output, then Drained with what the socket took
	out := c.Output()
	fmt.Println("output bytes:", len(out) > 0)
	c.Drained(len(out))
	if c.Idle() {
		c.ReleaseBuffers() // an idle connection holds no buffer
	}
	fmt.Println("streams:", c.Streams())
	// Output:
	// to server: "GET /hi HTTP/1.1\r\nhost: example.com\r\ncookie: a=1; b=2\r\nx-forwarded-proto: https\r\n\r\n"
	// body taken: 5
	// output bytes: true
	// streams: 0
}
