package tlshello

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// captureConn is the client's side of a connection that records what the
// client writes and then fails it, so a handshake stops after the hello.
type captureConn struct {
	net.Conn // nil: only the methods below are used by crypto/tls here
	out      bytes.Buffer
}

func (c *captureConn) Write(p []byte) (int, error)      { c.out.Write(p); return 0, errors.New("captured") }
func (c *captureConn) Read([]byte) (int, error)         { return 0, errors.New("captured") }
func (c *captureConn) Close() error                     { return nil }
func (c *captureConn) SetDeadline(time.Time) error      { return nil }
func (c *captureConn) SetReadDeadline(time.Time) error  { return nil }
func (c *captureConn) SetWriteDeadline(time.Time) error { return nil }
func (c *captureConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *captureConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }

// clientHello returns the bytes crypto/tls's client sends first with cfg.
func clientHello(t testing.TB, cfg *tls.Config) []byte {
	c := &captureConn{}
	if err := tls.Client(c, cfg).Handshake(); err == nil {
		t.Fatal("handshake succeeded on a capturing conn")
	}
	if c.out.Len() == 0 {
		t.Fatal("client wrote nothing")
	}
	return c.out.Bytes()
}

// serverSees returns what crypto/tls's server reads from the same bytes:
// whether it got as far as a parsed ClientHello, and its name and ALPN list.
func serverSees(b []byte) (ok bool, name string, protos []string, versions []uint16) {
	srv, cli := net.Pipe()
	defer srv.Close()
	// The client side writes the hello and drains what the server answers
	// (an alert) at the same time, so neither end waits on the other.
	go func() {
		cli.Write(b)
		cli.Close()
	}()
	go func() {
		var buf [512]byte
		for {
			if _, err := cli.Read(buf[:]); err != nil {
				return
			}
		}
	}()
	s := tls.Server(srv, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		ok, name, protos, versions = true, h.ServerName, h.SupportedProtos, h.SupportedVersions
		return nil, errors.New("stop")
	}})
	s.SetDeadline(time.Now().Add(5 * time.Second))
	s.Handshake()
	return ok, name, protos, versions
}

func protocols(h *Hello) []string {
	var p []string
	for i := range h.NumProtocols() {
		p = append(p, string(h.Protocol(i)))
	}
	return p
}

var realCases = []struct {
	name        string
	cfg         *tls.Config
	wantName    string
	wantALPN    []string
	wantVersion uint16
}{
	{"tls13 sni alpn", &tls.Config{ServerName: "www.example.com", NextProtos: []string{"h2", "http/1.1"}}, "www.example.com", []string{"h2", "http/1.1"}, tls.VersionTLS13},
	{"tls13 upper-case sni lower-cased", &tls.Config{ServerName: "WWW.Example.COM"}, "www.example.com", nil, tls.VersionTLS13},
	{"tls13 no sni", &tls.Config{InsecureSkipVerify: true}, "", nil, tls.VersionTLS13},
	{"ip literal: client sends no sni", &tls.Config{ServerName: "192.0.2.1"}, "", nil, tls.VersionTLS13},
	{"tls12 sni alpn", &tls.Config{ServerName: "a.example", MaxVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, "a.example", []string{"http/1.1"}, tls.VersionTLS12},
	{"tls12 no sni no alpn", &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}, "", nil, tls.VersionTLS12},
	{"tls10 only", &tls.Config{ServerName: "old.example", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS10}, "old.example", nil, tls.VersionTLS10},
	{"trailing dot dropped by the client", &tls.Config{ServerName: "dot.example."}, "dot.example", nil, tls.VersionTLS13},
	{"many protocols", &tls.Config{ServerName: "x-1.y", NextProtos: []string{"h2", "http/1.1", "spdy/3", "acme-tls/1"}}, "x-1.y", []string{"h2", "http/1.1", "spdy/3", "acme-tls/1"}, tls.VersionTLS13},
}

func TestRealClientHellos(t *testing.T) {
	for _, tc := range realCases {
		t.Run(tc.name, func(t *testing.T) {
			b := clientHello(t, tc.cfg)
			h, err := Parse(b)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if h.Len != len(b) {
				t.Errorf("Len %d, want %d", h.Len, len(b))
			}
			if string(h.ServerName()) != tc.wantName {
				t.Errorf("ServerName %q, want %q", h.ServerName(), tc.wantName)
			}
			if !slices.Equal(protocols(&h), tc.wantALPN) {
				t.Errorf("ALPN %q, want %q", protocols(&h), tc.wantALPN)
			}
			if h.Version != tc.wantVersion {
				t.Errorf("Version %#x, want %#x", h.Version, tc.wantVersion)
			}
			// crypto/tls's server reads the same.
			ok, name, protos, _ := serverSees(b)
			if !ok {
				t.Fatal("crypto/tls server did not parse the hello")
			}
			// crypto/tls keeps the client's case; we lower-case.
			if !strings.EqualFold(name, string(h.ServerName())) || !slices.Equal(protos, protocols(&h)) {
				t.Errorf("crypto/tls sees %q %q", name, protos)
			}
			// Trailing bytes after the hello's records (early data, or
			// a pipelined record) are not inspected.
			h2, err := Parse(append(slices.Clip(b), 23, 3, 3, 0, 1, 'x'))
			if err != nil || h2.Len != len(b) {
				t.Errorf("with a record after: Len %d err %v", h2.Len, err)
			}
		})
	}
}

// Every strict prefix of a valid hello is ErrIncomplete: never a refusal,
// never an answer from part of the hello.
func TestTruncatedAtEveryByteIsIncomplete(t *testing.T) {
	for _, tc := range realCases {
		b := clientHello(t, tc.cfg)
		for n := range len(b) {
			if _, err := Parse(b[:n]); err != ErrIncomplete {
				t.Fatalf("%s: prefix %d/%d: %v", tc.name, n, len(b), err)
			}
		}
	}
}

// resplit returns the handshake message of a single-record hello b cut into
// records at the given message offsets.
func resplit(b []byte, cuts ...int) []byte {
	msg := b[recordHeader:]
	var out []byte
	prev := 0
	for _, c := range append(cuts, len(msg)) {
		out = append(out, 22, 3, 1, byte((c-prev)>>8), byte(c-prev))
		out = append(out, msg[prev:c]...)
		prev = c
	}
	return out
}

func TestSplitIntoRecordsAtEveryByte(t *testing.T) {
	b := clientHello(t, &tls.Config{ServerName: "split.example", NextProtos: []string{"h2", "http/1.1"}})
	want, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	msgLen := len(b) - recordHeader
	for c := 1; c < msgLen; c++ {
		s := resplit(b, c)
		h, err := Parse(s)
		if err != nil || h.Len != len(s) || string(h.ServerName()) != "split.example" ||
			!slices.Equal(protocols(&h), protocols(&want)) || h.Version != want.Version {
			t.Fatalf("cut at %d: %v %q %q", c, err, h.ServerName(), protocols(&h))
		}
		for n := range len(s) {
			if _, err := Parse(s[:n]); err != ErrIncomplete {
				t.Fatalf("cut at %d, prefix %d: %v", c, n, err)
			}
		}
	}
	// One byte per record: still the same answer, and crypto/tls agrees.
	var cuts []int
	for c := 1; c < msgLen; c++ {
		cuts = append(cuts, c)
	}
	s := resplit(b, cuts...)
	h, err := Parse(s)
	if err != nil || string(h.ServerName()) != "split.example" || h.Len != len(s) {
		t.Fatalf("1-byte records: %v %q", err, h.ServerName())
	}
	if ok, name, _, _ := serverSees(s); !ok || name != "split.example" {
		t.Fatalf("crypto/tls on 1-byte records: %v %q", ok, name)
	}
}

func TestParseDoesNotAllocate(t *testing.T) {
	b := clientHello(t, &tls.Config{ServerName: "alloc.example", NextProtos: []string{"h2", "http/1.1"}})
	split := resplit(b, 100, 101, 300)
	for _, in := range [][]byte{b, split, b[:len(b)-1], []byte("GET / HTTP/1.1\r\n")} {
		if n := testing.AllocsPerRun(100, func() { Parse(in) }); n != 0 {
			t.Errorf("%d allocations per Parse of %d bytes", int(n), len(in))
		}
	}
}

func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"tls13", &tls.Config{ServerName: "bench.example.com", NextProtos: []string{"h2", "http/1.1"}}},
		{"tls12", &tls.Config{ServerName: "bench.example.com", MaxVersion: tls.VersionTLS12}},
	} {
		in := clientHello(b, bc.cfg)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
