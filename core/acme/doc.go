// Package acme obtains and renews the managed certificates of the
// configuration (a certificate with an "acme" member, config.
// CertificateACME) from an ACME server (RFC 8555), answers their
// challenges, and keeps their run-time state.
//
// It owns, per managed certificate, one goroutine (a worker) that orders
// when the certificate is not issued yet or no longer matches its
// domains or key type, and renews it at two thirds of its lifetime, or
// sooner inside the window the CA's renewal information suggests (ARI,
// RFC 9773; read after each issuance and again per its Retry-After;
// every node computes the time, the order-lock holder orders); a
// failed order is retried with an exponential backoff (Options.Backoff,
// doubling up to Options.MaxBackoff), and the certificate last issued
// keeps serving meanwhile. What a worker did last (status, the CA's
// problem, renewed_at, next_renewal_at, retry_at) is run-time state kept
// here, in memory (State): a retry or a state change makes no
// generation, revision or audit entry. The certificate obtained goes to
// the configuration through Options' Commit (the API's certificate write:
// validated, persisted, audited, applied; the binds naming the
// certificate hot-swap it as after an upload), so chain and key never
// leave the certificate store. The account's key (and an EAB HMAC key)
// is read from the account file the API created (account_sha256), stored
// like a certificate's key.
//
// Challenges are answered by spliced itself: http-01 through
// KeyAuthorization, which core/proxy calls for requests under
// /.well-known/acme-challenge/ on the clear binds of http frontends
// (before limits, rules and routes), and tls-alpn-01 through
// ChallengeCertificate, which core/tlsconf's configurations call for a
// ClientHello offering acme-tls/1. Both read maps swapped or locked
// briefly: safe from loop threads and handshake goroutines.
//
// # Several nodes
//
// With a Coordinator (core/cluster's ACMECoordinator, on etcd) one node
// orders each certificate: a worker whose certificate is due takes the
// certificate's order lock (a lease its node keeps alive) or, when another
// node holds it, tries again every 5 s; the holder reads the stored
// generation before ordering (the previous holder may have stored the
// certificate already) and keeps the lock through its retries. Challenge
// answers are published through the Coordinator and every node answers
// those it watches.
//
// # Why acmez and not certmagic
//
// The protocol is github.com/mholt/acmez (Caddy's ACME client): accounts,
// orders, challenge solvers, polling, nonce and error handling. certmagic,
// built on it, was not used: it runs its own maintenance goroutines, its
// own in-memory certificate cache and a Storage whose keys it writes
// when it likes (certificates, keys, locks, OCSP staples); spliced's
// certificates change only through the store's one writer (a new
// generation, validated, revisioned, audited, applied), and binds serve
// from the config, not from a second cache. acmez does one order when
// asked, and this package decides when.
//
// Concurrency: every method is safe for concurrent use. Run owns the
// workers; it returns when its context ends, after they did.
package acme
