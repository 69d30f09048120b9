package rules

import (
	"bytes"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/http1"
)

// FuzzRules feeds rule documents through what the API does with them
// (strict decode, Normalize, Validate) and compiles and runs those that
// validate against a request and a response. Nothing may panic; a rule
// set that validates compiles; no field a rule writes may carry CR, LF or
// NUL, nor name a field that frames the message.
func FuzzRules(f *testing.F) {
	f.Add([]byte(twentyRules()), []byte(`[]`))
	f.Add([]byte(`[{"when":{"not":{"host":"*.a.b","query":{"name":"x","equals":"1"}}},"do":{"set_header":{"name":"X-A","value":"v"}}},{"do":{"strip_prefix":"/api"}},{"do":{"redirect":{"scheme":"https","port":8443}}}]`),
		[]byte(`[{"when":{"status":200,"path_prefix":"/s/"},"do":{"add_header":{"name":"Cache-Control","value":"max-age=60"}}},{"do":{"del_header":"Server"}}]`))
	f.Add([]byte(`[{"do":{"set_header":{"name":"Content-Length","value":"0\r\nX: y"}}}]`), []byte(`[{"when":{"header":{"name":"Server","prefix":"x"}},"do":{"deny":{"status":502,"body":"no"}}}]`))
	f.Add([]byte(`[{"when":{"src":["10.0.0.0/8","::1"],"tls":true,"sni":"a.b"},"do":{"deny":{"status":451}}},{"do":{"use_backend":"web"}},{"do":{"limit":"per_ip"}}]`), []byte(`null`))
	reqRaw := []byte("POST /api/x/../y?a=1&b HTTP/1.1\r\nHost: a.b:80\r\nX-A: 1\r\nContent-Length: 0\r\n\r\n")
	respRaw := []byte("HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 0\r\n\r\n")
	f.Fuzz(func(t *testing.T, reqRules, respRules []byte) {
		doc := []byte(`{"backends":[{"name":"web","mode":"http"}],"frontends":[{"name":"f","mode":"http","default_backend":"web","binds":[],"rules":{"request":`)
		doc = append(append(append(append(doc, reqRules...), `,"response":`...), respRules...), `}}]}`...)
		var c config.Config
		if config.DecodeBytes(doc, &c) != nil {
			return
		}
		c.Normalize()
		if config.Validate(&c, config.Env{}) != nil {
			return
		}
		rr := c.Frontends[0].Rules
		if rr == nil {
			return
		}
		req, err := Compile(config.PhaseRequest, rr.Request, 2)
		if err != nil {
			t.Fatalf("valid request rules do not compile: %v", err)
		}
		resp, err := Compile(config.PhaseResponse, rr.Response, 2)
		if err != nil {
			t.Fatalf("valid response rules do not compile: %v", err)
		}
		e, r, buf := reqEnv(t, string(reqRaw))
		if req != nil {
			res := Result{Hits: make([]uint64, req.Words())}
			req.Eval(e, &res, 1)
			fl := req.Filter(res.Hits)
			_ = r.AppendEndToEndFilter(nil, buf, 0, nil, &fl)
			checkFields(t, req.AppendFields(nil, res.Hits))
			_ = req.Path(e.Path, res.Hits)
			if res.Stop >= 0 {
				if _, ok := req.AppendAnswer(make([]byte, 0, 4096), res.Stop, e.Host, r.Target.Bytes(buf)); !ok {
					t.Fatal("an answer does not fit 4 KiB")
				}
			}
		}
		if resp != nil {
			pre := make([]uint64, resp.Words())
			resp.Precompute(e, pre)
			rs := &http1.Response{}
			rs.Reset()
			rs.Parse(respRaw, http1.MethodPOST)
			re := &Env{Buf: respRaw, Head: &rs.Head, Status: rs.Status, Pre: pre}
			res := Result{Hits: make([]uint64, resp.Words())}
			resp.Eval(re, &res, 0)
			checkFields(t, resp.AppendFields(nil, res.Hits))
		}
	})
}

// checkFields parses the appended field lines as a head: each line is one
// valid field, none of them framing.
func checkFields(t *testing.T, d []byte) {
	head := append([]byte("GET / HTTP/1.1\r\nHost: a\r\n"), d...)
	head = append(head, "\r\n"...)
	r := &http1.Request{}
	r.Reset()
	n, err := r.Parse(head)
	if err != nil || n != len(head) {
		t.Fatalf("rewritten fields do not parse as one head: %v\n%q", err, d)
	}
	if r.ContentLength != -1 || r.Body != http1.BodyNone || bytes.Count(head, []byte("\r\n")) != r.N+2 {
		t.Fatalf("rewritten fields change the framing: %q", d)
	}
}
