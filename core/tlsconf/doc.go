// Package tlsconf builds the crypto/tls configurations of spliced from the
// config model: the server side of a bind's tls member (Certs.Server) and
// the session ticket keys every such configuration shares (TicketKeys).
// It owns the parsed certificates (cached by chain_sha256) and the ticket
// key file of the state directory; it does not accept connections or run
// handshakes (core/proxy does, with the *tls.Config built here).
//
// core/engine builds one *tls.Config per bind with tls at each Apply and
// hands it to core/proxy, which runs the handshakes (on its helper
// goroutines) and then moves records from the loops.
//
// # Server configurations
//
// Certs.Server builds a *tls.Config from a normalized, validated config:
//
//   - Certificate choice (GetCertificate), from maps built with the
//     configuration, so a handshake costs a map lookup and no allocation
//     beyond crypto/tls's own: the certificates whose DNS SANs hold the
//     client's SNI (case-insensitive, a trailing dot ignored), else those
//     whose wildcard SAN "*.example.com" matches it (one label: "a.example.com",
//     not "a.b.example.com" nor "example.com"), else every certificate of
//     the bind; among those, in the bind's order, the first the client
//     supports (ClientHelloInfo.SupportsCertificate: an ECDSA and an RSA
//     certificate for one name serve each client the one it can verify),
//     or the first of them when it supports none (the handshake then fails
//     with the client's alert rather than with a certificate for another
//     name).
//   - MinVersion from min_version; the newest is TLS 1.3. CipherSuites
//     from ciphers (TLS 1.0-1.2 only: Go's TLS 1.3 suites are not
//     configurable). CurvePreferences are Go's defaults (X25519MLKEM768,
//     X25519, P-256...). NextProtos from alpn (core/engine replaces it
//     with config.OfferedALPN, which derives an http frontend's unset list
//     from its http.versions): a client that offers ALPN
//     without any of them fails the handshake (no_application_protocol)
//     instead of speaking a protocol it did not ask for.
//   - client_ca: ClientCAs, with ClientAuth RequireAndVerifyClientCert
//     (client_auth "required") or VerifyClientCertIfGiven ("optional").
//   - Renegotiation: a Go server never offers nor accepts it (a client's
//     renegotiation ClientHello mid-connection is answered with a
//     no_renegotiation alert); nothing here can turn it on.
//   - Session tickets are on (TLS 1.2 tickets and TLS 1.3 PSKs), encrypted
//     with the keys of the TicketKeys passed in.
//
// # Session tickets
//
// Every configuration built with one *TicketKeys encrypts and decrypts
// tickets with that object's keys (WrapSession/UnwrapSession call
// EncryptTicket/DecryptTicket of an internal *tls.Config whose
// SetSessionTicketKeys the rotation and Set update), so a configuration
// rebuilt at an Apply resumes the sessions of the one it replaces, and a
// rotation reaches every bind at once. A ticket carries a context (in
// SessionState.Extra): the SHA-256 of the bind's certificates (chain
// hashes) and client certificate policy (client_ca, client_auth). A
// ticket resumes only on a configuration with the same context: not on a
// bind with other certificates (a session is bound to the identity the
// server proved), nor with another client certificate policy (crypto/tls
// also checks that a resumed session's verified chain ends at one of the
// current client CAs; the context makes the rule not depend on it). A
// ticket issued before a bind's certificates or client_ca change does not
// resume after. Two spliced nodes with the same bind settings and ticket
// keys resume each other's sessions.
//
// Keys are generated (crypto/rand) and rotated every
// tuning.tls.ticket_rotation_ms: the new key encrypts, the three newest
// decrypt, so a ticket resumes for two to three periods. Or they are set
// through PUT /api/v1/tls/ticket-keys (Set): several nodes then share
// them, and automatic rotation stops; the operator rotates by setting
// them again, newest first, keeping the previous ones to decrypt
// (HAProxy's "set ssl tls-key"). Either way the keys are written to
// tls-ticket-keys.json in the state directory (0600, atomically) and read
// at start, so a restart does not end the sessions; the API and the logs
// show key ids (the first 8 hex digits of the key's SHA-256), never keys.
//
// # Several nodes
//
// The nodes of a cluster share one set (cluster.ShareTicketKeys keeps it
// in etcd): NewSharedTicketKeys (or Share) gives TicketKeys the store (a
// KeyStore: conditional edit and read; a rotation due at
// start is then made in the store, not locally), Seed
// stores its keys when the store has none, and Install takes each set the
// store holds, newer sets only (written to the state directory,
// which becomes the copy a restart reads while the store is unreachable;
// the timer set to the newest key's creation plus the period). Sets are
// ordered by a serial each write puts in the set (above the stored set's,
// the installed one's and the time in ns), not by the store's revisions,
// which go back when etcd is restored from an older snapshot. A
// rotation or Set reads the stored set back and installs it, so that a
// set read before it and handed over after it (the watch) does not
// replace it. When the rotation timer fires,
// the set is rotated in the store, conditional on the set read: a set
// whose newest key is younger than the period was rotated by another
// node, and is installed as it is; so the cluster rotates once per
// period. Set writes the store, then installs. When the store does not
// answer, the keys stay (a key made here would not be shared) and the
// rotation is tried again within 5 s (or the period, if shorter).
//
// # Client configurations
//
// Client (client.go) builds the *tls.Config the proxy speaks TLS to a
// server with (a server's tls: verify, ca_pem, sni), one per server
// object, with that server's session cache: see Client.
//
// Concurrency: Certs, TicketKeys and the *tls.Config built are safe for
// concurrent use by any goroutine (the handshake helpers call
// GetCertificate, WrapSession and UnwrapSession concurrently).
package tlsconf
