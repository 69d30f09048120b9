package engine

import (
	"reflect"
	"strconv"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/proxy"
	"github.com/spliced-proxy/spliced/core/rules"
	"github.com/spliced-proxy/spliced/core/stats"
)

// ruleRT is a frontend's compiled rules, carried over while its rules and
// the number of loops stay as they were, so that the per-rule hit
// counters live on across unrelated changes (a server's weight...). A
// change of the rules compiles them anew: their counters start at 0.
type ruleRT struct {
	cfg       config.Rules
	loops     int
	req, resp *rules.Set
}

// compileRules compiles (or reuses) the rules of cf for nloops loops. It
// does not change f: the caller commits the result with the generation.
func compileRules(f *feRT, cf *config.Frontend, nloops int) (*ruleRT, error) {
	if cf.Rules == nil || len(cf.Rules.Request) == 0 && len(cf.Rules.Response) == 0 {
		return nil, nil
	}
	if p := f.rules; p != nil && p.loops == nloops && reflect.DeepEqual(&p.cfg, cf.Rules) {
		return p, nil
	}
	rt := &ruleRT{cfg: *cf.Rules.Clone(), loops: nloops}
	var err error
	if rt.req, err = rules.Compile(config.PhaseRequest, cf.Rules.Request, nloops); err != nil {
		return nil, err
	}
	if rt.resp, err = rules.Compile(config.PhaseResponse, cf.Rules.Response, nloops); err != nil {
		return nil, err
	}
	return rt, nil
}

// frontRules resolves the use_backend rules of rt to this generation's
// backends (a missing one answers 503) and its limit rules to the
// generation's limits ls (a missing one limits nothing).
func frontRules(rt *ruleRT, bes map[string]*beRT, ls *proxy.LimitSet) *proxy.FrontRules {
	if rt == nil {
		return nil
	}
	n := rt.req.Len()
	fr := &proxy.FrontRules{Req: rt.req, Resp: rt.resp, Backends: make([]*proxy.Backend, n), Limits: make([]int, n)}
	for i := range fr.Backends {
		fr.Limits[i] = -1
		switch act, name := rt.req.Action(i); act {
		case rules.UseBackend:
			if b := bes[name]; b != nil {
				fr.Backends[i] = b.pb
			}
		case rules.Limit:
			if ls != nil {
				fr.Limits[i] = ls.Index(name)
			}
		}
	}
	return fr
}

// rulesError is the ApplyError of rules that did not compile (validation
// lets none through: a defect, reported rather than run without them).
func rulesError(i int, cf *config.Frontend, err error) error {
	return &config.ApplyError{Field: "/frontends/" + strconv.Itoa(i) + "/rules", Object: "frontend " + cf.Name, Err: err}
}

// ruleStats is the API view of a frontend's rules: nil when it has none
// and none ever acted.
func ruleStats(rt *ruleRT, t stats.Totals) *stats.RuleCounts {
	rc := t.Rules()
	if rt == nil && rc.Denied == 0 && rc.Redirected == 0 && rc.Rewritten == 0 {
		return nil
	}
	if rt != nil {
		rc.Request = ruleHits(rt.req)
		rc.Response = ruleHits(rt.resp)
	}
	return &rc
}

func ruleHits(s *rules.Set) []stats.RuleHits {
	out := []stats.RuleHits{}
	for i, n := range s.Hits() {
		act, _ := s.Action(i)
		out = append(out, stats.RuleHits{Index: i, Action: act.String(), Hits: n})
	}
	return out
}
