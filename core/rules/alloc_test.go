package rules

import (
	"strconv"
	"strings"
	"testing"
)

// twentyRules are 20 request rules of every condition kind, none of
// which matches getReq: the bench row's rules.
func twentyRules() string {
	var b strings.Builder
	b.WriteString("[")
	for i := range 20 {
		if i > 0 {
			b.WriteString(",")
		}
		n := strconv.Itoa(i)
		switch i % 5 {
		case 0:
			b.WriteString(`{"when":{"path_prefix":"/nomatch` + n + `/"},"do":{"deny":{}}}`)
		case 1:
			b.WriteString(`{"when":{"host":"h` + n + `.example.net"},"do":{"redirect":{"scheme":"https"}}}`)
		case 2:
			b.WriteString(`{"when":{"header":{"name":"X-Block-` + n + `","present":true}},"do":{"deny":{}}}`)
		case 3:
			b.WriteString(`{"when":{"src":["10.` + n + `.0.0/16"]},"do":{"deny":{}}}`)
		case 4:
			b.WriteString(`{"when":{"method":"PUT","query":{"name":"q` + n + `"}},"do":{"set_header":{"name":"X-R","value":"` + n + `"}}}`)
		}
	}
	b.WriteString("]")
	return b.String()
}

// TestEvalAllocatesNothing pins zero allocations for the evaluation of 20
// rules none of which matches, and for the header rewrite of a matching
// set_header rule (issue 28's targets).
func TestEvalAllocatesNothing(t *testing.T) {
	s := compile(t, "request", twentyRules())
	e, r, buf := reqEnv(t, getReq)
	res := Result{Hits: make([]uint64, s.Words())}
	if n := testing.AllocsPerRun(1000, func() { s.Eval(e, &res, 1) }); n != 0 {
		t.Fatalf("Eval of 20 non-matching rules: %v allocations", n)
	}
	if res.Stop != -1 || res.Backend != -1 || res.Rewrites {
		t.Fatalf("a rule matched: %+v", res)
	}
	set := compile(t, "request", `[{"do":{"set_header":{"name":"X-Frame-Options","value":"DENY"}}},{"do":{"del_header":"Accept"}}]`)
	dst := make([]byte, 0, 4096)
	res2 := Result{Hits: make([]uint64, set.Words())}
	var f Filter // the proxy keeps it in the stream: no escape per request
	if n := testing.AllocsPerRun(1000, func() {
		set.Eval(e, &res2, 0)
		f = set.Filter(res2.Hits)
		d := r.AppendEndToEndFilter(dst[:0], buf, 0, nil, &f)
		_ = set.AppendFields(d, res2.Hits)
	}); n != 0 {
		t.Fatalf("set_header rewrite: %v allocations", n)
	}
}

func BenchmarkEval20NoMatch(b *testing.B) {
	s := compile(b, "request", twentyRules())
	e, _, _ := reqEnv(b, getReq)
	res := Result{Hits: make([]uint64, s.Words())}
	b.ReportAllocs()
	for b.Loop() {
		s.Eval(e, &res, 0)
	}
}

func BenchmarkSetHeader(b *testing.B) {
	s := compile(b, "request", `[{"do":{"set_header":{"name":"X-Frame-Options","value":"DENY"}}}]`)
	e, r, buf := reqEnv(b, getReq)
	res := Result{Hits: make([]uint64, s.Words())}
	dst := make([]byte, 0, 4096)
	var f Filter
	b.ReportAllocs()
	for b.Loop() {
		s.Eval(e, &res, 0)
		f = s.Filter(res.Hits)
		d := r.AppendEndToEndFilter(dst[:0], buf, 0, nil, &f)
		_ = s.AppendFields(d, res.Hits)
	}
}
