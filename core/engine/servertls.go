package engine

import (
	"strconv"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/tlsconf"
)

// serverTLS gives each new server of bb that has a tls section its client
// *tls.Config (tlsconf.Client), once, before bb is published: a server
// carried over from the previous generation has the same tls (balance.Build
// makes a new Server when it changes) and keeps its configuration, with its
// session cache, so reconnects keep resuming across Applies. cb is the
// backend bb was built from (same server order); i its index, for the
// error's pointer. Only bb.Servers[lo:hi] are looked at (the others are
// known to be carried over: balance.Backend.Window).
func serverTLS(bb *balance.Backend, cb *config.Backend, i, lo, hi int) error {
	for j := lo; j < hi; j++ {
		s := bb.Servers[j]
		if s.TLSSpec == nil || s.TLS != nil {
			continue
		}
		c, err := tlsconf.Client(cb.Servers[j])
		if err != nil {
			return &config.ApplyError{
				Field:  "/backends/" + strconv.Itoa(i) + "/servers/" + strconv.Itoa(j) + "/tls",
				Object: "backend " + cb.Name + " server " + s.Name,
				Err:    err,
			}
		}
		s.TLS = c
	}
	return nil
}
