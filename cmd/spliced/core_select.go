package main

import (
	"log/slog"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/accesslog"
	"github.com/spliced-proxy/spliced/core/acme"
	"github.com/spliced-proxy/spliced/core/engine"
	"github.com/spliced-proxy/spliced/core/tlsconf"
)

// newCore builds the data plane the admin API drives; certs and keys build
// the TLS configurations of binds with tls.
func newCore(log *slog.Logger, certs *tlsconf.Certs, keys *tlsconf.TicketKeys, alog *accesslog.Log, acme *acme.Manager) (core.Control, error) {
	return engine.New(engine.Options{Logger: log, Certs: certs, TicketKeys: keys, AccessLog: alog, ACME: acme})
}
