package main

// Issue 25: a frontend's card on the Frontends page shows its HTTP/2
// connections and streams, its TLS handshakes and its PROXY headers, the
// numbers of /api/v1/stats, live, and stays readable at 375 px.

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// feMembers is what /api/v1/stats says of a frontend's optional members.
type feMembers struct {
	Name string `json:"name"`
	H2   *struct {
		ConnCur        int64 `json:"conn_cur"`
		StreamsTotal   int64 `json:"streams_total"`
		StreamsCur     int64 `json:"streams_cur"`
		StreamsRefused int64 `json:"streams_refused"`
		ResetsSent     int64 `json:"resets_sent"`
		ResetsReceived int64 `json:"resets_received"`
	} `json:"h2"`
	TLS *struct {
		Full     int64 `json:"handshakes_full"`
		Resumed  int64 `json:"handshakes_resumed"`
		Failed   int64 `json:"handshakes_failed"`
		Timeouts int64 `json:"handshake_timeouts"`
	} `json:"tls"`
	Proxy *struct {
		Accepted int64 `json:"accepted"`
		Refused  int64 `json:"refused"`
		Invalid  int64 `json:"invalid"`
		Timeouts int64 `json:"timeouts"`
	} `json:"proxy"`
}

// h2Client is a raw h2c client connection: the prefaces and SETTINGS
// exchanged, spliced's max_concurrent_streams in force.
type h2Client struct {
	t  *testing.T
	c  net.Conn
	fr *http2.Framer
	hb bytes.Buffer
	he *hpack.Encoder
}

func dialH2C(t *testing.T, addr string) *h2Client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, http2.ClientPreface)
	k := &h2Client{t: t, c: c, fr: http2.NewFramer(c, c)}
	k.he = hpack.NewEncoder(&k.hb)
	if err := k.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	k.until("the server's SETTINGS", func(f http2.Frame) bool {
		s, ok := f.(*http2.SettingsFrame)
		return ok && !s.IsAck()
	})
	k.fr.WriteSettingsAck()
	return k
}

// until reads frames until done says yes.
func (k *h2Client) until(what string, done func(http2.Frame) bool) http2.Frame {
	k.t.Helper()
	for {
		f, err := k.fr.ReadFrame()
		if err != nil {
			k.t.Fatalf("waiting for %s: %v", what, err)
		}
		if done(f) {
			return f
		}
	}
}

// post opens stream id with a POST whose body never comes: it stays open.
func (k *h2Client) post(id uint32) {
	k.t.Helper()
	k.hb.Reset()
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/"}, {":authority", "a"}} {
		k.he.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	if err := k.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: k.hb.Bytes(), EndHeaders: true}); err != nil {
		k.t.Fatal(err)
	}
}

// sync sends a PING and reads up to its answer: spliced has read every
// frame sent before it.
func (k *h2Client) sync() {
	k.t.Helper()
	k.fr.WritePing(false, [8]byte{1})
	k.until("the PING's answer", func(f http2.Frame) bool {
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck()
	})
}

func TestUIFrontendH2TLSStats(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	in := startSpliced(t, "")
	cert := testutil.NewCert(t, testutil.CertSpec{Names: []string{"h2.example.com"}})
	uploadCert(in, "h2", cert, false)
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "web", "mode": "http", "servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": h2E2EOrigin(t)}},
	})
	port, tport, pport := testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "web", "mode": "http", "default_backend": "web",
		"http": map[string]any{"h2": map[string]any{"max_concurrent_streams": 1}},
		"binds": []map[string]any{
			{"name": "clear", "address": "127.0.0.1", "port": port},
			{"name": "tls", "address": "127.0.0.1", "port": tport, "tls": map[string]any{"certificates": []string{"h2"}}},
			{"name": "pp", "address": "127.0.0.1", "port": pport, "accept_proxy": map[string]any{"trusted": []string{"127.0.0.1"}}},
		},
	})
	// A frontend that speaks HTTP/1.1 only, on a clear bind: neither line.
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "old", "mode": "http", "default_backend": "web", "http": map[string]any{"versions": []string{"1.1"}},
		"binds": []map[string]any{{"name": "b", "address": "127.0.0.1", "port": testutil.FreePort(t)}},
	})

	// stats reads a frontend's members from the API.
	stats := func(name string) feMembers {
		t.Helper()
		var doc struct {
			Frontends []feMembers `json:"frontends"`
		}
		in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &doc)
		for _, f := range doc.Frontends {
			if f.Name == name {
				return f
			}
		}
		t.Fatalf("no frontend %s in /api/v1/stats", name)
		return feMembers{}
	}
	if o := stats("old"); o.H2 != nil || o.TLS != nil || o.Proxy != nil {
		t.Fatalf("/api/v1/stats of old has members: %+v", o)
	}

	u := newUITest(t, in)
	u.shotsTo()
	u.run("load overview",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
	u.page("frontends")

	// matches waits until the card shows the numbers of /api/v1/stats
	// (the page follows within a few seconds) and cond holds of them.
	shown := func(attr string) string {
		return u.text(fmt.Sprintf(`section[data-frontend="web"] [%s="web"]:not([hidden])`, attr))
	}
	matches := func(what string, cond func(feMembers) bool) {
		t.Helper()
		var last string
		testutil.Eventually(t, 20*time.Second, func() bool {
			f := stats("web")
			if f.H2 == nil || f.TLS == nil || f.Proxy == nil {
				t.Fatalf("/api/v1/stats of web lacks a member: %+v", f)
			}
			h2 := fmt.Sprintf("HTTP/2 conns now %dstreams open %dtotal %drefused %dresets sent %dreceived %d",
				f.H2.ConnCur, f.H2.StreamsCur, f.H2.StreamsTotal, f.H2.StreamsRefused, f.H2.ResetsSent, f.H2.ResetsReceived)
			tl := fmt.Sprintf("TLS handshakes full %dresumed %dfailed %dtimeouts %d", f.TLS.Full, f.TLS.Resumed, f.TLS.Failed, f.TLS.Timeouts)
			pp := fmt.Sprintf("PROXY headers accepted %drefused (untrusted peer) %dinvalid %dtimeouts %d", f.Proxy.Accepted, f.Proxy.Refused, f.Proxy.Invalid, f.Proxy.Timeouts)
			got := [3]string{shown("data-h2-counts"), shown("data-tls-counts"), shown("data-proxy-counts")}
			last = fmt.Sprintf("page %q, API %q", got, [3]string{h2, tl, pp})
			return cond(f) && got == [3]string{h2, tl, pp}
		}, what)
		t.Logf("%s: %s", what, last)
	}
	matches("the lines before any traffic", func(f feMembers) bool { return f.H2.StreamsTotal == 0 })
	if n := evalJS[int](u, `document.querySelectorAll('section[data-frontend="old"] [data-present]:not([hidden])').length`); n != 0 {
		t.Fatalf("the HTTP/1.1-only frontend shows %d member lines", n)
	}

	// Traffic while the page is open: HTTP/2 over h2c and over TLS (two
	// connections, the second resumed), a refused and a reset stream, a
	// PROXY header, and a stream left open.
	get := func(c *http.Client, url string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.ProtoMajor != 2 || res.StatusCode != 200 {
			t.Fatalf("GET %s: %s %d", url, res.Proto, res.StatusCode)
		}
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &p}}
	for range 5 {
		get(h2c, "http://127.0.0.1:"+strconv.Itoa(port)+"/")
	}
	h2c.CloseIdleConnections()
	cache := tls.NewLRUClientSessionCache(4)
	for range 2 {
		var tp http.Protocols
		tp.SetHTTP2(true)
		c := &http.Client{Transport: &http.Transport{Protocols: &tp,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: "h2.example.com", ClientSessionCache: cache}}}
		for range 2 {
			get(c, "https://127.0.0.1:"+strconv.Itoa(tport)+"/")
		}
		c.CloseIdleConnections()
	}
	// Stream 1 stays open (its body never comes); stream 3 is past
	// max_concurrent_streams 1: refused with an RST_STREAM.
	k := dialH2C(t, "127.0.0.1:"+strconv.Itoa(port))
	k.post(1)
	k.post(3)
	if r := k.until("stream 3's RST_STREAM", func(f http2.Frame) bool {
		r, ok := f.(*http2.RSTStreamFrame)
		return ok && r.StreamID == 3
	}).(*http2.RSTStreamFrame); r.ErrCode != http2.ErrCodeRefusedStream {
		t.Fatalf("stream 3 reset with %v, want REFUSED_STREAM", r.ErrCode)
	}
	pc, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(pport))
	if err != nil {
		t.Fatal(err)
	}
	pc.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(pc, "PROXY TCP4 203.0.113.9 198.51.100.1 4242 80\r\nGET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	io.ReadAll(pc)
	pc.Close()
	matches("the lines with a connection and a stream open", func(f feMembers) bool {
		return f.H2.ConnCur == 1 && f.H2.StreamsCur == 1 && f.H2.StreamsTotal >= 9 && f.H2.StreamsRefused == 1 &&
			f.TLS.Full >= 1 && f.Proxy.Accepted == 1
	})
	// The refused stream's count is red.
	if !evalJS[bool](u, `document.querySelector('[data-h2-counts="web"] [data-stat="fe/web/h2Refused"]').classList.contains('bad-v')`) {
		t.Fatal("refused streams not in red")
	}

	// The client resets stream 1, then goes.
	if err := k.fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	k.sync()
	k.c.Close()
	matches("the lines once the client reset its stream and closed", func(f feMembers) bool {
		return f.H2.ConnCur == 0 && f.H2.StreamsCur == 0 && f.H2.ResetsReceived == 1 && f.H2.ResetsSent >= 1
	})
	u.errs.check(t, "frontends")
	u.shot("frontend-members")

	u.run("phone viewport", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile),
		chromedp.ScrollIntoView(chromedp.CSS(`[data-h2-counts="web"]`)))
	u.fitsWidth("frontend-members", `section[data-frontend="web"] [data-present] span`)
	u.shot("frontend-members-375")
	u.errs.check(t, "frontends at 375 px")
}
