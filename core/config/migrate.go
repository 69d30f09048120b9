package config

import "fmt"

// SchemaVersion is the format version of the documents this version
// writes (Config.Schema). A document without "schema" (0) was written
// before versions were numbered.
//
// History (each step is one function of Migrate, applied in order):
//
//	0 → 1: the HTTP/2 version. Normalize used to store alpn ["http/1.1"]
//	       (the then default) on every TLS bind of an http frontend, so a
//	       stored list could not be told from one an operator set. The
//	       list offered is now derived from the frontend's http.versions
//	       when alpn is not set (OfferedALPN); migrateALPNDefault drops a
//	       list equal to the old default so that it is derived.
const SchemaVersion = 1

// Migrate brings a stored document written by an older version to the
// current schema. Call it on a document read from storage (config.json,
// a revision, etcd, a node's copy), after decoding and before Normalize,
// which stamps SchemaVersion: a document a client sends (PUT /config, a
// bootstrap file) is in the current format whatever its schema member
// says, and is not migrated. A document of a newer schema than this
// version knows (after a downgrade) is an error: its meaning may have
// changed in ways this version cannot see.
func (c *Config) Migrate() error {
	if c.Schema > SchemaVersion {
		return fmt.Errorf("document of schema %d, written by a newer spliced (this one reads up to %d): %w", c.Schema, SchemaVersion, ErrInvalid)
	}
	if c.Schema < 1 {
		c.migrateALPNDefault()
	}
	return nil
}

// migrateALPNDefault (schema 0 → 1) removes an alpn equal to the old
// default (["http/1.1"], what Normalize stored on every TLS bind of an
// http frontend before schema 1) from the TLS binds of http frontends. An operator who had set
// ["http/1.1"] on purpose cannot be told from the default: such a bind
// now offers what http.versions says (h2 too, by default); http.versions
// ["1.1"], or alpn set again, restores HTTP/1.1 only (README, "HTTP
// versions").
func (c *Config) migrateALPNDefault() {
	for i := range c.Frontends {
		f := &c.Frontends[i]
		if f.Mode != ModeHTTP {
			continue
		}
		for j := range f.Binds {
			if t := f.Binds[j].TLS; t != nil && len(t.ALPN) == 1 && t.ALPN[0] == ALPNHTTP11 {
				t.ALPN = nil
			}
		}
	}
}
