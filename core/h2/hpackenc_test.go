package h2

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestHPACKEncoderRoundTrip: what writeField encodes, x/net's decoder
// reads back field for field: whole static entries indexed, static names
// by index (past the 4-bit prefix too), new names literal, strings raw
// (lengths past the 7-bit prefix too), and the first block, only it,
// begins with the table size update to 0.
func TestHPACKEncoderRoundTrip(t *testing.T) {
	long := strings.Repeat("v", 300)
	blocks := [][]hpack.HeaderField{
		{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "text/plain"}},
		{{Name: ":status", Value: "302"}, {Name: "location", Value: "/a"}, {Name: "x-long", Value: long},
			{Name: "www-authenticate", Value: "Basic"}, {Name: "server", Value: ""}},
		{{Name: ":method", Value: "GET"}, {Name: ":method", Value: "PATCH"}, {Name: ":scheme", Value: "https"},
			{Name: ":scheme", Value: "ftp"}, {Name: ":path", Value: "/"}, {Name: ":path", Value: "/index.html"},
			{Name: ":path", Value: "/x"}, {Name: ":authority", Value: "a:1"}, {Name: "accept-encoding", Value: "gzip, deflate"},
			{Name: "accept-encoding", Value: "br"}, {Name: strings.Repeat("n", 130), Value: "1"}},
		{{Name: ":status", Value: "204"}, {Name: ":status", Value: "206"}, {Name: ":status", Value: "304"},
			{Name: ":status", Value: "400"}, {Name: ":status", Value: "404"}, {Name: ":status", Value: "500"}},
	}
	var c connCore
	var got []hpack.HeaderField
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) { got = append(got, f) })
	for i, want := range blocks {
		c.eblock = c.eblock[:0]
		for _, f := range want {
			c.writeField(f.Name, f.Value)
		}
		if first := len(c.eblock) > 0 && c.eblock[0] == 0x20; first != (i == 0) {
			t.Fatalf("block %d: table size update %v, want it in the first block only", i, first)
		}
		got = got[:0]
		if _, err := dec.Write(c.eblock); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		if err := dec.Close(); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		if len(got) != len(want) {
			t.Fatalf("block %d: %d fields decoded, want %d", i, len(got), len(want))
		}
		for j := range want {
			if got[j].Name != want[j].Name || got[j].Value != want[j].Value {
				t.Fatalf("block %d field %d: %q: %q, want %q: %q", i, j, got[j].Name, got[j].Value, want[j].Name, want[j].Value)
			}
		}
	}
	// Whole static entries are one byte each.
	c.eblock = c.eblock[:0]
	c.writeField(":status", "200")
	c.writeField(":method", "GET")
	if !bytes.Equal(c.eblock, []byte{0x88, 0x82}) {
		t.Fatalf("indexed fields encoded as % x", c.eblock)
	}
}

// TestHPACKStaticIndexMatchesTheTable: staticIndex agrees with x/net's
// copy of the RFC's static table for every entry (names: the first entry
// of each).
func TestHPACKStaticIndexMatchesTheTable(t *testing.T) {
	var c connCore
	seen := map[string]bool{}
	for i := uint64(1); i <= 61; i++ {
		// an indexed field's block decodes to entry i
		var f hpack.HeaderField
		dec := hpack.NewDecoder(4096, func(x hpack.HeaderField) { f = x })
		c.eblock = appendHpackInt(c.eblock[:0], 0x80, 7, i)
		if _, err := dec.Write(c.eblock); err != nil {
			t.Fatal(err)
		}
		idx, whole := staticIndex(f.Name, f.Value)
		if f.Value != "" && (idx != uint8(i) || !whole) {
			t.Errorf("%q: %q: index %d whole %v, want %d whole", f.Name, f.Value, idx, whole, i)
		}
		if !seen[f.Name] {
			seen[f.Name] = true
			if idx != uint8(i) {
				t.Errorf("name %q: index %d, want %d", f.Name, idx, i)
			}
		}
	}
	if idx, _ := staticIndex("x-other", "1"); idx != 0 {
		t.Errorf("x-other: index %d, want 0", idx)
	}
}

// nginxFields are the response fields of the bench's nginx origin, as
// it writes them.
var nginxFields = []Field{
	{[]byte("Server"), []byte("nginx/1.22.1")}, {[]byte("Date"), []byte("Sun, 06 Dec 2026 10:22:00 GMT")},
	{[]byte("Content-Type"), []byte("application/octet-stream")}, {[]byte("Content-Length"), []byte("64")},
	{[]byte("Last-Modified"), []byte("Sun, 06 Dec 2026 10:21:00 GMT")}, {[]byte("Connection"), []byte("keep-alive")},
	{[]byte("ETag"), []byte(`"6752d0a4-40"`)}, {[]byte("X-Bench-XFF"), []byte("127.0.0.1")},
	{[]byte("Accept-Ranges"), []byte("bytes")},
}

// BenchmarkResponseHead is one indexed GET in, the nginx origin's
// response head (nginxFields) and 64 bytes of body out: the codec's share
// of the h2 bench row.
func BenchmarkResponseHead(b *testing.B) {
	h := &nopHandler{respond: true, body: make([]byte, 64), fields: nginxFields}
	c := handshake(b, h, Config{Settings: Settings{MaxConcurrentStreams: 1 << 30}, Now: func() time.Time { return time.Time{} }})
	var buf, eb bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	e := hpack.NewEncoder(&eb)
	kv := []string{":method", "GET", ":scheme", "http", ":path", "/64", ":authority", "127.0.0.1:8080", "user-agent", "h2load nghttp2/1.52.0"}
	id := uint32(1)
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		eb.Reset()
		for i := 0; i < len(kv); i += 2 {
			e.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: eb.Bytes(), EndStream: true, EndHeaders: true})
		fr.WriteWindowUpdate(0, 64)
		id += 2
		if _, err := c.Feed(buf.Bytes()); err != nil {
			b.Fatal(err)
		}
		c.Drained(len(c.Output()))
	}
}

// TestEncodeFieldFilters: the fields a head carries out are lowercased
// and only valid ones pass: no pseudo-header field from the caller, no
// name that is not a token, no value with CR, LF or NUL, no
// connection-specific field, and no host in a request (its :authority
// carries it).
func TestEncodeFieldFilters(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		request     bool
		want        string // the name sent, "" for none
	}{
		{"Content-Type", "text/plain", false, "content-type"},
		{"X-MiXeD_1!", "v", false, "x-mixed_1!"},
		{"x", "", false, "x"},
		{":status", "200", false, ""},
		{"", "v", false, ""},
		{"bad name", "v", false, ""},
		{"bad:name", "v", false, ""},
		{"x-é", "v", false, ""},
		{"X-Ok", "a\r\nb", false, ""},
		{"X-Ok", "a\x00", false, ""},
		{"Connection", "close", false, ""},
		{"Keep-Alive", "5", false, ""},
		{"Transfer-Encoding", "chunked", false, ""},
		{"Upgrade", "h2c", false, ""},
		{"TE", "trailers", false, ""},
		{"Trailer", "x", false, ""},
		{"Proxy-Connection", "x", false, ""},
		{"Host", "a", false, "host"},
		{"Host", "a", true, ""},
	} {
		var c connCore
		c.henc.sizeSent = true
		c.encodeField([]byte(tc.name), []byte(tc.value), tc.request)
		var got []hpack.HeaderField
		dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) { got = append(got, f) })
		if _, err := dec.Write(c.eblock); err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.want == "" && len(got) != 0:
			t.Errorf("%q: %q sent as %q, want it dropped", tc.name, tc.value, got[0].Name)
		case tc.want != "" && (len(got) != 1 || got[0].Name != tc.want || got[0].Value != tc.value):
			t.Errorf("%q: %q sent as %v, want %q", tc.name, tc.value, got, tc.want)
		}
	}
}
