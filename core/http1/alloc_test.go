package http1

import (
	"net/netip"
	"testing"
)

// browserRequest is a typical browser navigation head (~500 bytes).
var browserRequest = []byte("GET /articles/2024/how-we-proxy.html?utm_source=feed&ref=home HTTP/1.1\r\n" +
	"Host: www.example.com\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n" +
	"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n" +
	"Accept-Language: en-US,en;q=0.5\r\n" +
	"Accept-Encoding: gzip, deflate, br, zstd\r\n" +
	"Referer: https://www.example.com/\r\n" +
	"Connection: keep-alive\r\n" +
	"Cookie: session=8f14e45fceea167a5a36dedd4bea2543; theme=dark\r\n" +
	"Upgrade-Insecure-Requests: 1\r\n" +
	"Sec-Fetch-Dest: document\r\n" +
	"Sec-Fetch-Mode: navigate\r\n" +
	"Sec-Fetch-Site: same-origin\r\n" +
	"Priority: u=0, i\r\n" +
	"\r\n")

var typicalResponse = []byte("HTTP/1.1 200 OK\r\n" +
	"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n" +
	"Server: origin\r\n" +
	"Content-Type: text/html; charset=utf-8\r\n" +
	"Content-Length: 12345\r\n" +
	"Cache-Control: max-age=60\r\n" +
	"ETag: \"abc123\"\r\n" +
	"Vary: Accept-Encoding\r\n" +
	"\r\n")

var chunkedBody = []byte("400\r\n" + string(make([]byte, 0x400)) + "\r\n" +
	"1f;ext=1\r\n0123456789012345678901234567890\r\n" +
	"0\r\nX-Checksum: 1234\r\n\r\n")

func TestParsingDoesNotAllocate(t *testing.T) {
	r := &Request{}
	resp := &Response{}
	d := &Chunked{}
	out := make([]byte, 0, 4096)
	client := netip.MustParseAddr("192.0.2.7")
	cases := []struct {
		name string
		fn   func()
	}{
		{"request head", func() {
			r.Reset()
			if n, err := r.Parse(browserRequest); err != nil || n != len(browserRequest) {
				t.Fatal(n, err)
			}
		}},
		{"request head byte by byte", func() {
			r.Reset()
			for i := 0; i <= len(browserRequest); i += 7 {
				r.Parse(browserRequest[:i])
			}
			if n, err := r.Parse(browserRequest); err != nil || n != len(browserRequest) {
				t.Fatal(n, err)
			}
		}},
		{"request error", func() {
			r.Reset()
			if _, err := r.Parse([]byte("GET / HTTP/1.1\r\nHost : a\r\n\r\n")); err == nil {
				t.Fatal("accepted")
			}
		}},
		{"response head", func() {
			resp.Reset()
			if n, err := resp.Parse(typicalResponse, MethodGET); err != nil || n != len(typicalResponse) {
				t.Fatal(n, err)
			}
		}},
		{"chunked body", func() {
			d.Reset()
			in := chunkedBody
			for len(in) > 0 && !d.Done() {
				n, _, err := d.Decode(in)
				if err != nil {
					t.Fatal(err)
				}
				in = in[n:]
			}
		}},
		{"rewrite head", func() {
			r.Reset()
			r.Parse(browserRequest)
			o := AppendRequestLine(out[:0], r.Method.Bytes(browserRequest), r.Target.Bytes(browserRequest))
			o = r.AppendEndToEnd(o, browserRequest, 0)
			o = AppendXForwardedFor(o, client)
			o = AppendXForwardedProto(o, false)
			o = AppendVia(o, r.Minor, "spliced")
			o = AppendContentLength(o, 12345)
			o = AppendChunkSize(o, 4096)
			o = AppendStatusLine(o, 200, nil)
			_ = AppendError(o, 503)
		}},
		{"client X-Forwarded-Proto replaced", func() {
			in := []byte("GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-Proto: https\r\nx_forwarded_proto: https\r\n\r\n")
			r.Reset()
			r.Parse(in)
			o := r.AppendEndToEnd(out[:0], in, DropXForwardedProto)
			_ = AppendXForwardedProto(o, false)
		}},
		{"hop-by-hop with Connection tokens", func() {
			in := []byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: x-a, x-b\r\nX-A: 1\r\nX-C: 2\r\n\r\n")
			r.Reset()
			r.Parse(in)
			_ = r.AppendEndToEnd(out[:0], in, 0)
		}},
	}
	for _, tc := range cases {
		if a := testing.AllocsPerRun(100, tc.fn); a != 0 {
			t.Errorf("%s: %v allocations per run", tc.name, a)
		}
	}
}

func BenchmarkParseRequest(b *testing.B) {
	r := &Request{}
	b.SetBytes(int64(len(browserRequest)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset()
		if _, err := r.Parse(browserRequest); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseRequestSegmented feeds the head in 3 TCP-ish pieces.
func BenchmarkParseRequestSegmented(b *testing.B) {
	r := &Request{}
	b.SetBytes(int64(len(browserRequest)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset()
		r.Parse(browserRequest[:100])
		r.Parse(browserRequest[:300])
		if _, err := r.Parse(browserRequest); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseResponse(b *testing.B) {
	r := &Response{}
	b.SetBytes(int64(len(typicalResponse)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset()
		if _, err := r.Parse(typicalResponse, MethodGET); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChunkedDecode(b *testing.B) {
	d := &Chunked{}
	b.SetBytes(int64(len(chunkedBody)))
	b.ReportAllocs()
	for b.Loop() {
		d.Reset()
		in := chunkedBody
		for len(in) > 0 && !d.Done() {
			n, _, err := d.Decode(in)
			if err != nil {
				b.Fatal(err)
			}
			in = in[n:]
		}
	}
}

func BenchmarkRewriteRequestHead(b *testing.B) {
	r := &Request{}
	r.Reset()
	r.Parse(browserRequest)
	out := make([]byte, 0, 4096)
	client := netip.MustParseAddr("192.0.2.7")
	b.ReportAllocs()
	for b.Loop() {
		o := AppendRequestLine(out[:0], r.Method.Bytes(browserRequest), r.Target.Bytes(browserRequest))
		o = r.AppendEndToEnd(o, browserRequest, 0)
		o = AppendXForwardedFor(o, client)
		o = AppendXForwardedProto(o, false)
		_ = AppendVia(o, r.Minor, "spliced")
	}
}
