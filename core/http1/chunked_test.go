package http1

import (
	"bytes"
	"strings"
	"testing"
)

// decodeAll runs d over in as a proxy would, handing it whatever is left
// each time; it returns the bytes validated, the payload, and the error.
func decodeAll(d *Chunked, in []byte) (consumed int, payload []byte, err error) {
	for len(in) > 0 && !d.Done() {
		n, data, err := d.Decode(in)
		if err != nil {
			return consumed, payload, err
		}
		if n == 0 {
			break
		}
		payload = append(payload, in[n-data:n]...)
		consumed += n
		in = in[n:]
	}
	return consumed, payload, nil
}

var chunkedCases = []struct {
	name    string
	in      string
	maxBody int64
	payload string
	done    bool
	rest    string // bytes left after the body
	err     *Error
}{
	{name: "one chunk", in: "5\r\nhello\r\n0\r\n\r\n", payload: "hello", done: true},
	{name: "several chunks", in: "5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n", payload: "hello world", done: true},
	{name: "empty body", in: "0\r\n\r\n", done: true},
	{name: "upper-case hex", in: "A\r\n0123456789\r\n0\r\n\r\n", payload: "0123456789", done: true},
	{name: "leading zeros", in: "0005\r\nhello\r\n0\r\n\r\n", payload: "hello", done: true},
	{name: "sixteen digits", in: "0000000000000005\r\nhello\r\n0\r\n\r\n", payload: "hello", done: true},
	{name: "seventeen digits", in: "00000000000000005\r\nhello\r\n0\r\n\r\n", err: ErrChunkTooLarge},
	{name: "extension", in: "5;name=value;q=\"x y\"\r\nhello\r\n0;last\r\n\r\n", payload: "hello", done: true},
	{name: "trailers", in: "5\r\nhello\r\n0\r\nX-Sum: abc\r\nX-Two:\r\n\r\n", payload: "hello", done: true},
	{name: "next request not consumed", in: "1\r\nx\r\n0\r\n\r\nGET / HTTP/1.1\r\n", payload: "x", done: true, rest: "GET / HTTP/1.1\r\n"},
	{name: "incomplete is not an error", in: "5\r\nhel", payload: "hel"},
	{name: "largest chunk size accepted", in: "3fffffffffffffff\r\nabc", payload: "abc"},
	{name: "MaxBody exactly", in: "5\r\nhello\r\n0\r\n\r\n", maxBody: 5, payload: "hello", done: true},

	{name: "MaxBody exceeded", in: "5\r\nhello\r\n1\r\nx\r\n0\r\n\r\n", maxBody: 5, err: ErrBodyTooLarge},
	{name: "negative size", in: "-5\r\nhello\r\n0\r\n\r\n", err: ErrChunkSize},
	{name: "plus sign", in: "+5\r\nhello\r\n0\r\n\r\n", err: ErrChunkSize},
	{name: "0x prefix", in: "0x5\r\nhello\r\n0\r\n\r\n", err: ErrChunkSize},
	{name: "leading space", in: " 5\r\nhello\r\n0\r\n\r\n", err: ErrChunkSize},
	{name: "BWS before extension", in: "5 ;a\r\nhello\r\n0\r\n\r\n", err: ErrChunkSize},
	{name: "trailing space without extension", in: "5 \r\nhello\r\n0\r\n\r\n", err: ErrChunkSize},
	{name: "empty size", in: "\r\nhello\r\n0\r\n\r\n", err: ErrChunkSize},
	{name: "non-hex digit", in: "5g\r\nhello\r\n0\r\n\r\n", err: ErrChunkSize},
	{name: "size overflow", in: "4000000000000000\r\n", err: ErrChunkTooLarge},
	{name: "size far overflow", in: "ffffffffffffffffff\r\n", err: ErrChunkTooLarge},
	{name: "bare LF after size", in: "5\nhello\r\n0\r\n\r\n", err: ErrChunkSize},
	{name: "bare CR after size", in: "5\rhello\r\n0\r\n\r\n", err: ErrChunkBareCR},
	{name: "bare CR in extension", in: "5;a\rb\r\nhello\r\n0\r\n\r\n", err: ErrChunkBareCR},
	{name: "LF in extension", in: "5;a\nb\r\nhello\r\n0\r\n\r\n", err: ErrChunkExt},
	{name: "NUL in extension", in: "5;a\x00\r\nhello\r\n0\r\n\r\n", err: ErrChunkExt},
	{name: "extension too long", in: "5;" + strings.Repeat("a", 5000) + "\r\nhello\r\n0\r\n\r\n", err: ErrChunkLine},
	{name: "data longer than size", in: "5\r\nhelloX\r\n0\r\n\r\n", err: ErrChunkCRLF},
	{name: "data shorter than size", in: "5\r\nhell\r\n0\r\n\r\n", err: ErrChunkCRLF},
	{name: "bare LF after data", in: "5\r\nhello\n0\r\n\r\n", err: ErrChunkCRLF},
	{name: "trailer obs-fold", in: "0\r\nX: a\r\n b\r\n\r\n", err: ErrTrailerObsFold},
	{name: "trailer space before colon", in: "0\r\nX : a\r\n\r\n", err: ErrTrailerColon},
	{name: "trailer without colon", in: "0\r\nXa\r\n\r\n", err: ErrTrailer},
	{name: "trailer NUL in value", in: "0\r\nX: a\x00\r\n\r\n", err: ErrTrailer},
	{name: "trailer bare LF", in: "0\r\nX: a\n\r\n", err: ErrTrailer},
	{name: "final bare LF", in: "0\r\n\n", err: ErrTrailer},
	{name: "final CR not LF", in: "0\r\n\rX", err: ErrChunkBareCR},
	{name: "trailer section too large", in: "0\r\nX: " + strings.Repeat("v", 17000) + "\r\n\r\n", err: ErrTrailerLarge},
}

func TestChunkedDecoderTable(t *testing.T) {
	for _, tc := range chunkedCases {
		t.Run(tc.name, func(t *testing.T) {
			d := &Chunked{MaxBody: tc.maxBody}
			in := []byte(tc.in)
			n, payload, err := decodeAll(d, in)
			if tc.err != nil {
				if err != tc.err {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				if _, _, err2 := d.Decode([]byte("0\r\n\r\n")); err2 == nil {
					t.Error("decoder usable after an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if string(payload) != tc.payload || d.Done() != tc.done || string(in[n:]) != tc.rest {
				t.Errorf("payload %q done %v rest %q", payload, d.Done(), in[n:])
			}
			if d.Total() != int64(len(tc.payload)) {
				t.Errorf("Total %d", d.Total())
			}
		})
	}
}

// TestChunkedPiecesSameAsWhole: any split of the input gives the same
// validated length, payload, completion and error.
func TestChunkedPiecesSameAsWhole(t *testing.T) {
	for _, tc := range chunkedCases {
		in := []byte(tc.in)
		whole := &Chunked{MaxBody: tc.maxBody}
		wn, wp, werr := decodeAll(whole, in)
		step := 1
		if len(in) > 1000 {
			step = 101
		}
		for i := 0; i <= len(in); i += step {
			d := &Chunked{MaxBody: tc.maxBody}
			n1, p1, err := decodeAll(d, in[:i])
			if err == nil && n1 == i {
				var n2 int
				var p2 []byte
				n2, p2, err = decodeAll(d, in[i:])
				n1 += n2
				p1 = append(p1, p2...)
			}
			if err != werr || (err == nil && (n1 != wn || !bytes.Equal(p1, wp) || d.Done() != whole.Done())) {
				t.Fatalf("%s: split at %d: n=%d payload=%q err=%v; whole n=%d payload=%q err=%v",
					tc.name, i, n1, p1, err, wn, wp, werr)
			}
		}
	}
}

func TestChunkedSkipForSplicedData(t *testing.T) {
	d := &Chunked{}
	in := []byte("a\r\n")
	n, data, err := d.Decode(in)
	if err != nil || n != 3 || data != 0 {
		t.Fatalf("n=%d data=%d err=%v", n, data, err)
	}
	ok, left := d.InData()
	if !ok || left != 10 {
		t.Fatalf("InData %v %d", ok, left)
	}
	d.Skip(10) // moved by splice
	if _, _, err := decodeAll(d, []byte("\r\n0\r\n\r\n")); err != nil || !d.Done() {
		t.Fatalf("err=%v done=%v", err, d.Done())
	}
	d.Reset()
	d.Decode([]byte("2\r\n"))
	d.Skip(3)
	if _, _, err := d.Decode([]byte("\r\n")); err == nil {
		t.Error("Skip beyond the chunk accepted")
	}
}

// TestChunkedUnreadOffersDataAgain: data given back after a Decode is
// decoded again, and the body still ends where it ends.
func TestChunkedUnreadOffersDataAgain(t *testing.T) {
	in := []byte("5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n")
	var d Chunked
	d.Reset()
	n, data, err := d.Decode(in)
	if err != nil || data != 5 || string(in[n-data:n]) != "hello" {
		t.Fatalf("first decode: n=%d data=%d err=%v", n, data, err)
	}
	d.Unread(3) // "llo" not passed on
	n -= 3
	payload := append([]byte(nil), in[n-2:n]...) // "he" went out
	for !d.Done() {
		k, data, err := d.Decode(in[n:])
		if err != nil {
			t.Fatal(err)
		}
		payload = append(payload, in[n+k-data:n+k]...)
		n += k
	}
	if string(payload) != "helloabc" || n != len(in) || d.Total() != 8 {
		t.Fatalf("payload %q, consumed %d of %d, total %d", payload, n, len(in), d.Total())
	}
}
