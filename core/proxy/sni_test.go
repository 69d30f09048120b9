package proxy

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/tlshello"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// clientHello is the ClientHello crypto/tls sends for serverName.
func clientHello(t *testing.T, serverName string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer b.Close()
	go func() {
		tls.Client(a, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""}).Handshake()
		a.Close()
	}()
	var buf []byte
	tmp := make([]byte, 4096)
	for {
		n, err := b.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if _, perr := tlshello.Parse(buf); perr != tlshello.ErrIncomplete {
			if perr != nil {
				t.Fatal(perr)
			}
			return buf
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// sniOrigin reads a whole ClientHello, reports it and answers tag.
func sniOrigin(t *testing.T, tag string, got chan<- []byte) *net.TCPAddr {
	return testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		var buf []byte
		tmp := make([]byte, 4096)
		for {
			n, err := c.Read(tmp)
			buf = append(buf, tmp[:n]...)
			if _, perr := tlshello.Parse(buf); perr != tlshello.ErrIncomplete || err != nil {
				break
			}
		}
		got <- buf
		c.Write([]byte(tag))
	}).Addr
}

func sniFrontend(t *testing.T, gotA, gotB, gotDef chan []byte) *Frontend {
	fe := frontend(t, SpliceAuto, sniOrigin(t, "D", gotDef))
	a := frontend(t, SpliceAuto, sniOrigin(t, "A", gotA)).Backend
	b := frontend(t, SpliceAuto, sniOrigin(t, "B", gotB)).Backend
	fe.SNI = []SNIRoute{NewSNIRoute("a.example.com", a), NewSNIRoute("*.b.example.com", b)}
	fe.InspectTimeout = 5 * time.Second
	return fe
}

func TestSNIRoutesOnTheClientHello(t *testing.T) {
	e := newEnv(t, defaultTuning())
	gotA, gotB, gotDef := make(chan []byte, 4), make(chan []byte, 4), make(chan []byte, 4)
	fe := sniFrontend(t, gotA, gotB, gotDef)
	for _, tc := range []struct {
		name, tag string
		got       chan []byte
	}{
		{"a.example.com", "A", gotA},
		{"x.b.example.com", "B", gotB},
		{"y.x.b.example.com", "B", gotB},
		{"b.example.com", "D", gotDef}, // the suffix alone does not match
		{"", "D", gotDef},              // no SNI
	} {
		hello := clientHello(t, tc.name)
		c := e.dial(fe)
		// Split: the proxy must have read the first part before the rest comes.
		c.Write(hello[:7])
		testutil.Eventually(t, 5*time.Second, func() bool { return e.state().bufs == 1 }, "first part read")
		c.Write(hello[7:])
		if got := <-tc.got; !bytes.Equal(got, hello) {
			t.Fatalf("%q: origin got %d bytes, want the %d of the hello unchanged", tc.name, len(got), len(hello))
		}
		ans := make([]byte, 1)
		if _, err := io.ReadFull(c, ans); err != nil || string(ans) != tc.tag {
			t.Fatalf("%q: answer %q %v, want %q", tc.name, ans, err, tc.tag)
		}
		c.Close()
		e.waitIdle()
	}
}

// expectClosed waits for the proxy to close c without an answer.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 1))
	if n != 0 || err == nil {
		t.Fatalf("read %d, %v: want the connection closed", n, err)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("connection not closed")
	}
}

func TestSNIInspectRefusals(t *testing.T) {
	hello := clientHello(t, "a.example.com")
	for _, tc := range []struct {
		name    string
		bufsize int
		send    []byte
		timeout bool
	}{
		{"plain http", 16 << 10, []byte("GET / HTTP/1.1\r\nHost: a.example.com\r\n\r\n"), false},
		{"garbage after a record header", 16 << 10, []byte{22, 3, 1, 0, 4, 2, 0, 0, 0}, false},
		{"buffer full before an answer", 128, hello, false},
		{"timeout", 16 << 10, hello[:len(hello)/2], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(hello) <= 128 {
				t.Fatal("hello too short for the full-buffer case")
			}
			tu := defaultTuning()
			tu.Bufsize = tc.bufsize
			e := newEnv(t, tu)
			got := make(chan []byte, 4)
			fe := sniFrontend(t, got, got, got)
			fe.InspectTimeout = 200 * time.Millisecond
			c := e.dial(fe)
			c.Write(tc.send)
			expectClosed(t, c)
			e.waitIdle()
			st := fe.Stats.Total(0)
			if tc.timeout && st.Timeouts != 1 || !tc.timeout && st.Aborts != 1 {
				t.Fatalf("timeouts %d aborts %d", st.Timeouts, st.Aborts)
			}
			select {
			case b := <-got:
				t.Fatalf("an origin was reached with %d bytes", len(b))
			default:
			}
		})
	}
}
