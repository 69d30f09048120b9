package proxy

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/rules"
)

// withRules compiles request and response rules (JSON lists) onto fe.
func withRules(t testing.TB, fe *Frontend, req, resp string, backends ...*Backend) {
	t.Helper()
	var f config.Frontend
	if err := config.DecodeBytes([]byte(`{"name":"f","rules":{"request":`+req+`,"response":`+resp+`}}`), &f); err != nil {
		t.Fatal(err)
	}
	f.Normalize()
	fr := &FrontRules{}
	var err error
	if fr.Req, err = rules.Compile(config.PhaseRequest, f.Rules.Request, 1); err != nil {
		t.Fatal(err)
	}
	if fr.Resp, err = rules.Compile(config.PhaseResponse, f.Rules.Response, 1); err != nil {
		t.Fatal(err)
	}
	fr.Backends = make([]*Backend, fr.Req.Len())
	k := 0
	for i := range fr.Backends {
		if act, _ := fr.Req.Action(i); act == rules.UseBackend {
			fr.Backends[i] = backends[k]
			k++
		}
	}
	fe.HTTP.Rules = fr
}

func TestHTTPRequestRules(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("web"))
	api := newRawOrigin(t, okAnswer("api"))
	fe := httpFrontend(t, nil, o.addr)
	apiBE := httpFrontend(t, nil, api.addr).Backend
	withRules(t, fe, `[
		{"when":{"src":["10.0.0.0/8"]},"do":{"deny":{}}},
		{"when":{"path_prefix":"/private/"},"do":{"deny":{"status":451,"body":"gone"}}},
		{"when":{"path":"/old"},"do":{"redirect":{"scheme":"https","code":301}}},
		{"when":{"header":{"name":"X-Api","present":true}},"do":{"use_backend":"api"}},
		{"do":{"set_header":{"name":"X-Forwarded-Host","value":"front"}}},
		{"do":{"del_header":"Cookie"}},
		{"when":{"path_prefix":"/app/"},"do":{"strip_prefix":"/app"}}
	]`, `[
		{"do":{"set_header":{"name":"Server","value":"spliced"}}},
		{"when":{"status":200,"path_prefix":"/app/"},"do":{"add_header":{"name":"X-App","value":"1"}}}
	]`, apiBE)

	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	resp, body := exchangeOn(t, c, br, "GET /app/x?q=1 HTTP/1.1\r\nHost: h\r\nCookie: a=b\r\nX-Forwarded-Host: evil\r\n\r\n", "GET")
	if resp.StatusCode != 200 || body != "web" || resp.Header.Get("Server") != "spliced" || resp.Header.Get("X-App") != "1" {
		t.Fatalf("status %d body %q header %v", resp.StatusCode, body, resp.Header)
	}
	got := o.received()
	if !strings.HasPrefix(got, "GET /x?q=1 HTTP/1.1\r\n") || strings.Contains(got, "Cookie") || strings.Contains(got, "evil") ||
		!strings.Contains(got, "\r\nX-Forwarded-Host: front\r\n") {
		t.Fatalf("server received %q", got)
	}

	resp, body = exchangeOn(t, c, br, "GET /y HTTP/1.1\r\nHost: h\r\nX-Api: 1\r\n\r\n", "GET")
	if resp.StatusCode != 200 || body != "api" || resp.Header.Get("X-App") != "" {
		t.Fatalf("use_backend: status %d body %q", resp.StatusCode, body)
	}

	resp, body = exchangeOn(t, c, br, "GET /old?a=b HTTP/1.1\r\nHost: www.example.com:8080\r\n\r\n", "GET")
	if resp.StatusCode != 301 || resp.Header.Get("Location") != "https://www.example.com/old?a=b" || body != "" {
		t.Fatalf("redirect: %d %q %q", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if fe.Stats.Loop(0).RuleRedirects.Load() != 1 || fe.Stats.Loop(0).RuleRewrites.Load() != 4 { // two requests and their responses
		t.Fatalf("redirects %d rewrites %d", fe.Stats.Loop(0).RuleRedirects.Load(), fe.Stats.Loop(0).RuleRewrites.Load())
	}

	c = e.dialHTTP(fe)
	br = bufio.NewReader(c)
	resp, body = exchangeOn(t, c, br, "GET /private/a HTTP/1.1\r\nHost: h\r\n\r\n", "GET")
	if resp.StatusCode != 451 || body != "gone" || !resp.Close {
		t.Fatalf("deny: %d %q close %v", resp.StatusCode, body, resp.Close)
	}
	if fe.Stats.Loop(0).RuleDenied.Load() != 1 || fe.Stats.Loop(0).Denied.Load() != 1 {
		t.Fatal("deny not counted")
	}
	if hits := fe.HTTP.Rules.Req.Hits(); hits[1] != 1 || hits[2] != 1 || hits[3] != 1 || hits[4] != 2 || hits[6] != 1 {
		t.Fatalf("rule hits %v", hits)
	}
}

func TestHTTPResponseRuleDeny(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, func(string) string {
		return "HTTP/1.1 500 Oops\r\nContent-Length: 5\r\nX-Debug: stack trace\r\n\r\nerror"
	})
	fe := httpFrontend(t, nil, o.addr)
	withRules(t, fe, `[]`, `[{"when":{"status":500},"do":{"deny":{"status":502,"body":"upstream failed"}}}]`)
	c := e.dialHTTP(fe)
	resp, body := exchangeOn(t, c, bufio.NewReader(c), "GET / HTTP/1.1\r\nHost: h\r\n\r\n", "GET")
	if resp.StatusCode != 502 || body != "upstream failed" || resp.Header.Get("X-Debug") != "" {
		t.Fatalf("%d %q %v", resp.StatusCode, body, resp.Header)
	}
	e.waitIdle()
}

// TestHTTPRuleHeadTooLarge: fields rules add that do not fit the buffer
// with the head give 431, never a write past the buffer.
func TestHTTPRuleHeadTooLarge(t *testing.T) {
	tu := defaultTuning()
	tu.Bufsize = 2048
	e := newEnv(t, tu)
	o := newRawOrigin(t, okAnswer("web"))
	fe := httpFrontend(t, nil, o.addr)
	v := strings.Repeat("v", 1000)
	withRules(t, fe, `[{"do":{"add_header":{"name":"X-A","value":"`+v+`"}}},{"do":{"add_header":{"name":"X-B","value":"`+v+`"}}}]`, `[]`)
	c := e.dialHTTP(fe)
	resp, _ := exchangeOn(t, c, bufio.NewReader(c), "GET / HTTP/1.1\r\nHost: h\r\n\r\n", "GET")
	if resp.StatusCode != 431 {
		t.Fatalf("status %d, want 431", resp.StatusCode)
	}
}

// TestHTTPRulesNoMatchDoNotAllocate pins zero allocations per request on a
// frontend with 20 rules none of which matches, and with a set_header rule
// that does.
func TestHTTPRulesNoMatchDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, tc := range []struct{ name, req, resp string }{
		{"20 rules, none matching", twentyRules, `[]`},
		{"set_header", `[{"do":{"set_header":{"name":"X-Frame-Options","value":"DENY"}}}]`, `[{"do":{"del_header":"X-Nothing"}}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			o := newRawServer(t)
			fe := httpFrontend(t, nil, o)
			withRules(t, fe, tc.req, tc.resp)
			c := e.dialHTTP(fe)
			c.SetDeadline(time.Time{})
			req := []byte("GET /x?a=1 HTTP/1.1\r\nHost: a\r\nX-Api-Key: k\r\n\r\n")
			buf := make([]byte, 4096)
			one := func() {
				if _, err := c.Write(req); err != nil {
					t.Fatal(err)
				}
				n := 0
				for n < len(rawResponse) {
					m, err := c.Read(buf[n:])
					if err != nil {
						t.Fatal(err)
					}
					n += m
				}
			}
			for i := 0; i < 50; i++ {
				one()
			}
			if a := testing.AllocsPerRun(200, one); a > 0.05 {
				t.Fatalf("%.2f allocations per request, want 0", a)
			}
			if !strings.HasPrefix(string(buf), "HTTP/1.1 200 OK\r\n") {
				t.Fatalf("response %q", buf[:len(rawResponse)])
			}
		})
	}
}

// twentyRules: the bench row's 20 request rules, none of which matches
// an ordinary GET (bench/run.sh has the same).
const twentyRules = `[
{"when":{"path_prefix":"/admin0/"},"do":{"deny":{}}},
{"when":{"host":"h1.example.net"},"do":{"redirect":{"scheme":"https"}}},
{"when":{"header":{"name":"X-Block-2","present":true}},"do":{"deny":{}}},
{"when":{"src":["10.3.0.0/16"]},"do":{"deny":{}}},
{"when":{"method":"PUT","query":{"name":"q4"}},"do":{"set_header":{"name":"X-R","value":"4"}}},
{"when":{"path_prefix":"/admin5/"},"do":{"deny":{}}},
{"when":{"host":"h6.example.net"},"do":{"redirect":{"scheme":"https"}}},
{"when":{"header":{"name":"X-Block-7","present":true}},"do":{"deny":{}}},
{"when":{"src":["10.8.0.0/16"]},"do":{"deny":{}}},
{"when":{"method":"PUT","query":{"name":"q9"}},"do":{"set_header":{"name":"X-R","value":"9"}}},
{"when":{"path_prefix":"/admin10/"},"do":{"deny":{}}},
{"when":{"host":"h11.example.net"},"do":{"redirect":{"scheme":"https"}}},
{"when":{"header":{"name":"X-Block-12","present":true}},"do":{"deny":{}}},
{"when":{"src":["10.13.0.0/16"]},"do":{"deny":{}}},
{"when":{"method":"PUT","query":{"name":"q14"}},"do":{"set_header":{"name":"X-R","value":"14"}}},
{"when":{"path_prefix":"/admin15/"},"do":{"deny":{}}},
{"when":{"host":"h16.example.net"},"do":{"redirect":{"scheme":"https"}}},
{"when":{"header":{"name":"X-Block-17","present":true}},"do":{"deny":{}}},
{"when":{"src":["10.18.0.0/16"]},"do":{"deny":{}}},
{"when":{"method":"PUT","query":{"name":"q19"}},"do":{"set_header":{"name":"X-R","value":"19"}}}
]`

// TestHTTPRuleLimitAction: a rule's limit action sends the requests it
// matches to a limit with track "rules" (TrackLimit): past its req_rate
// they get the limit's 429; requests the rule does not match are not
// counted.
func TestHTTPRuleLimitAction(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hi"))
	fe := httpFrontend(t, nil, o.addr)
	fe.Limits = limitSet(t, config.ModeHTTP, config.Limit{Name: "login", ReqRate: rate(2, 10000), Track: config.LimitTrackRules})
	withRules(t, fe, `[{"when":{"path":"/login"},"do":{"limit":"login"}}]`, `[]`)
	fe.HTTP.Rules.Limits = []int{fe.Limits.Index("login")}
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	for i := 0; i < 5; i++ { // not /login: never limited
		if resp, _ := exchangeOn(t, c, br, "GET /other HTTP/1.1\r\nHost: h\r\n\r\n", "GET"); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	for i := 0; i < 2; i++ {
		if resp, _ := exchangeOn(t, c, br, "GET /login HTTP/1.1\r\nHost: h\r\n\r\n", "GET"); resp.StatusCode != 200 {
			t.Fatalf("login %d: %d", i, resp.StatusCode)
		}
	}
	resp, _ := exchangeOn(t, c, br, "GET /login HTTP/1.1\r\nHost: h\r\n\r\n", "GET")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third login: %d %v, want 429 with Retry-After", resp.StatusCode, resp.Header)
	}
	if st := fe.Limits.List[0].Stats.Total(); st.Denied != 1 {
		t.Fatalf("limit counters %+v", st)
	}
}

// BenchmarkHTTPKeepAliveRules is BenchmarkHTTPKeepAlive on a frontend with
// rules: 20 none of which matches, one set_header (compare with
// BenchmarkHTTPKeepAlive: the cost of rules on a request).
func BenchmarkHTTPKeepAliveRules(b *testing.B) {
	for _, bc := range []struct{ name, rules string }{
		{"none", ""},
		{"20-nomatch", twentyRules},
		{"set_header", `[{"do":{"set_header":{"name":"X-Bench-Rule","value":"1"}}}]`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEnv(b, defaultTuning())
			o := newRawServer(b)
			fe := httpFrontend(b, nil, o)
			if bc.rules != "" {
				withRules(b, fe, bc.rules, `[]`)
			}
			c := e.dialHTTP(fe)
			c.SetDeadline(time.Time{})
			req := []byte("GET /x HTTP/1.1\r\nHost: a\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
			buf := make([]byte, 4096)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				n := 0
				for n < len(rawResponse) {
					m, err := c.Read(buf[n:])
					if err != nil {
						b.Fatal(err)
					}
					n += m
				}
			}
		})
	}
}
