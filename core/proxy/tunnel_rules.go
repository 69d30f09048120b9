package proxy

import (
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/rules"
	"github.com/spliced-proxy/spliced/core/stats"
)

// A tcp frontend's request rules (Frontend.Rules) test the client's
// address (the PROXY header's when a bind accepts one) and the server name
// it asked for (its ClientHello's, read in the inspect phase of sni.go
// when a rule tests sni; a TLS-terminating bind's; a PROXY header's
// authority), once per connection before the first connect: a deny closes
// the connection (termination PR, counted as denied).

// rulesDeny runs the frontend's rules for the tunnel's connection whose
// client asked for server name sni (nil: none known). It returns true when
// a rule denied the connection: it is closed.
func (t *Tunnel) rulesDeny(sni []byte) bool {
	set := t.fe.Rules
	if set == nil {
		return false
	}
	if len(sni) == 0 {
		sni = t.w.authority(t.pp, t.cli.xp)
	}
	var e rules.Env
	e.Src = t.w.clientAddr(t.cli.FD.Fd, t.pp).Addr()
	e.SNI = sni
	e.TLS = t.cli.xp.secure()
	var hits [(config.MaxRulesPerPhase + 63) / 64]uint64
	res := rules.Result{Hits: hits[:set.Words()]}
	set.Eval(&e, &res, t.w.id)
	if res.Stop < 0 {
		return false
	}
	t.fs.Denied.Add(1)
	t.fs.RuleDenied.Add(1)
	t.term = stats.Termination{'P', 'R'}
	t.close(closeNormal)
	return true
}

// inspects: the tunnel reads the client's ClientHello before it connects
// (sni.go): for SNI routes, or for rules that test sni on a bind that
// does not terminate TLS.
func (t *Tunnel) inspects() bool {
	return len(t.fe.SNI) > 0 || t.fe.Rules.TestsSNI() && !t.cli.xp.secure()
}
