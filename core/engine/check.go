package engine

import (
	"time"

	"github.com/spliced-proxy/spliced/core/proxy"
)

// swapCheckers gives every backend of the new generation its health
// checker (Apply's publish step, e.mu held, after the new backends are
// committed and the old ones retired; e.backends is still the previous
// generation):
//   - same check settings and the same Server objects: the running checker
//     goes on untouched (timers, counters);
//   - otherwise a new checker starts; the old one is stopped first and the
//     rise/fall counters of carried-over servers move over (proxy.Checker.Start);
//   - a check that was removed is stopped, and every server is set up again
//     (balance.Build did, but a probe that finished in between may have
//     taken one down since);
//   - the checker of a deleted backend is stopped.
func (e *Engine) swapCheckers(newBE map[string]*beRT) {
	for name, nb := range newBE {
		var prev *proxy.Checker
		if old := e.backends[name]; old != nil {
			prev = old.chk
		}
		if prev.Matches(nb.bb, len(e.loops)) {
			nb.chk = prev
			continue
		}
		nb.chk = proxy.NewChecker(nb.bb, e.workers, e.log)
		if nb.chk != nil {
			nb.chk.Start(prev)
			hc := nb.bb.Check
			e.log.Info("health checks started", "backend", name, "type", hc.Type,
				"interval_ms", hc.IntervalMs, "rise", hc.Rise, "fall", hc.Fall, "servers", len(nb.bb.Servers))
			continue
		}
		if prev != nil {
			prev.Stop()
			now := time.Now()
			for _, s := range nb.bb.Servers {
				s.SetUp(true, now)
			}
			e.log.Info("health checks stopped: servers considered up", "backend", name)
		}
	}
	for name, old := range e.backends {
		if newBE[name] == nil && old.chk != nil {
			old.chk.Stop()
		}
	}
}

// stopCheckers stops every health checker (Close, before the loops stop).
func (e *Engine) stopCheckers() {
	for _, b := range e.backends {
		b.chk.Stop()
	}
}

// CheckStates reports the health checks of backend (nil when it has
// none): per server, probes run and failed and the last outcome. Any
// goroutine.
func (e *Engine) CheckStates(backend string) []proxy.CheckState {
	e.mu.Lock()
	defer e.mu.Unlock()
	if b := e.backends[backend]; b != nil {
		return b.chk.States()
	}
	return nil
}
