// Package tlshello reads the ClientHello at the start of a TLS connection,
// as the bytes come from the socket, and returns what routing needs
// without terminating TLS: the SNI host name, the ALPN protocols offered
// and the highest version offered (TLS 1.3 or earlier). It is the parser
// behind SNI routing in tcp mode (HAProxy's req.ssl_sni): core/proxy's
// tunnel calls it on each read while it inspects (core/proxy/sni.go).
//
// # What it must not do
//
// Read or write sockets, buffer, allocate, log, or keep package-level
// mutable state (the error values are fixed and only read). It decides no
// policy: what to do on a refusal (close), how long to wait for more bytes
// (the inspect timeout) and where to route belong to the proxy.
//
// # Threads
//
// Parse is a pure function of its input: any goroutine may call it. A
// Hello is a value that owns its bytes.
//
// # The loop's contract
//
// Call Parse on everything read so far. ErrIncomplete (allocation-free)
// means "read more", and only while the input is a valid prefix; any other
// error is a *Error, final: more bytes would not change it. On success,
// Hello.Len bytes are the hello's records, to forward unchanged with what
// follows. Parse never needs more than MaxInspect bytes: with that many it
// answers, so a client cannot make the proxy buffer more. The first byte
// alone refuses plain HTTP on a TLS port (ErrNotTLS).
//
// # Invariants
//
//   - Parse does not allocate (testing.AllocsPerRun in hello_test.go; a
//     benchmark with -benchmem), whether it accepts, refuses or waits.
//   - Every strict prefix of an accepted hello is ErrIncomplete; a refusal
//     of a prefix is the refusal of the whole (FuzzParse).
//   - A hello split into records anywhere, down to one byte per record,
//     gives the same Hello (TestSplitIntoRecordsAtEveryByte).
//   - Where crypto/tls's server parses the same bytes, it sees the same
//     name (up to case) and ALPN list (FuzzParse, TestRealClientHellos).
//
// # Strictness (each rule pinned by a row of TestHostileHellos)
//
//   - Records: content type 22 (anything else first is ErrNotTLS, later
//     ErrNotHandshake), version 0x0301..0x0303 as clients send, length
//     1..2^14 (RFC 8446 §5.1 forbids empty handshake fragments). The
//     record holding the hello's last byte ends there (ErrTrailing): a
//     client sends nothing more before the server answers; bytes in later
//     records (early data) are not inspected.
//   - Handshake: type 1 (ClientHello), at most MaxHello bytes with its
//     header; the records must end within MaxInspect bytes (ErrTooLarge).
//   - Body: legacy_version 0x0301..0x0303 (no SSL 3.0); session id of at
//     most 32 bytes; a non-empty, even cipher suite list; at least one
//     compression method; then either nothing (allowed up to TLS 1.2) or
//     an extensions block that ends exactly at the message's end. Every
//     length fits its container and every container is consumed exactly
//     (ErrMalformed). Cipher suites, compression and the extensions not
//     named below are skipped: the server judges them.
//   - Extensions: each type at most once (RFC 8446 §4.2, ErrDuplicateExt),
//     at most MaxExtensions of them (browsers send about 20).
//   - server_name (RFC 6066 §3): exactly one entry, of type host_name;
//     several entries are refused (ErrSeveralNames) even if equal, so
//     that the proxy never routes on a name the server does not use. The
//     name is lower-cased and must be a DNS host name: labels of 1..63
//     letters, digits and hyphens, no hyphen at a label's ends, at most
//     253 bytes. No trailing dot (RFC 6066 says HostName has none, and
//     crypto/tls refuses it too), no empty name, no underscore, no IP
//     literal (a last label of digits only, or colons): ErrBadHostName.
//     With Encrypted Client Hello the name read is the outer, public one
//     (ECH's own extension is skipped), as for any proxy that does not
//     terminate TLS.
//   - ALPN (RFC 7301 §3.1): a non-empty list of non-empty names, at most
//     MaxALPNList bytes (ErrALPN): "h2" and "http/1.1" take 12.
//   - supported_versions (RFC 8446 §4.2.1): an even list of 2..254 bytes
//     naming at least one of TLS 1.0..1.3 (GREASE and unknown values are
//     ignored); Hello.Version is the highest of them, else legacy_version.
package tlshello
