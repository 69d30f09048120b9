// Package proxyproto reads and writes the PROXY protocol header (HAProxy's
// proxy-protocol.txt, versions 1 and 2): the few bytes a load balancer
// sends at the start of a connection to say which client it relays, before
// anything else (a TLS ClientHello, an HTTP request). core/proxy reads it
// on binds with accept_proxy (proxyhdr.go) and writes it to servers with
// send_proxy.
//
// # What it must not do
//
// Read or write sockets, buffer, allocate, log, or keep package-level
// mutable state (the error values and the CRC table are fixed and only
// read). It decides no policy: whom to trust, how long to wait for the
// header, what to do on a refusal belong to the proxy.
//
// # Threads
//
// Parse and the Append functions are pure functions of their input: any
// goroutine may call them. A Header is a value that owns its bytes.
//
// # The loop's contract
//
// Call Parse on everything received so far (a MSG_PEEK of the socket).
// ErrIncomplete means "read more", and only while the input is a valid
// prefix of a header; any other error is a *Error, final: more bytes would
// not change it. On success Header.Len bytes are the header: consume
// exactly those, and what follows belongs to the next layer. Parse never
// needs more than MaxHeader bytes: a header that would be longer is
// refused as soon as its length is known (ErrTooLarge), so a client
// cannot make the proxy wait for or hold more.
//
// # Strictness (each rule pinned by a row of TestParseRefuses)
//
//   - The first byte decides: 'P' starts a v1 line, '\r' a v2 signature;
//     anything else, or a byte that leaves the signature, is ErrNotProxy
//     at once (a client that speaks HTTP or TLS to a PROXY bind).
//   - v1: "PROXY TCP4|TCP6 <src> <dst> <sport> <dport>\r\n", single
//     spaces, at most 107 bytes with the CRLF (ErrTooLarge beyond);
//     addresses of the family named (IPv4 dotted quads without leading
//     zeros, IPv6 without zone), ports decimal 0..65535 without leading
//     zeros. "PROXY UNKNOWN" and anything up to the CRLF: no address
//     (Header.Local).
//   - v2: the 12-byte signature, version 2, command LOCAL (the block is
//     discarded: health checks of the balancer) or PROXY; family and
//     transport among those the spec lists, TCP over IPv4 or IPv6 with
//     their addresses, or AF_UNSPEC / AF_UNIX (no usable address: Local).
//     The length must hold the addresses; after them, TLVs must fill the
//     rest exactly. AUTHORITY (0x02, the client's SNI) is kept, lower
//     case, 1..255 host-name bytes, at most once; CRC32C (0x03), when
//     present, must match (ErrChecksum); UNIQUE_ID is at most 128 bytes;
//     the others (ALPN, SSL, NETNS, NOOP, the vendors' 0xE0..0xEF such
//     as AWS's VPC endpoint id) are skipped.
//
// # Invariants
//
//   - Parse does not allocate, whether it accepts, refuses or waits
//     (TestParseAllocatesNothing; BenchmarkParse with -benchmem).
//   - Every strict prefix of an accepted header is ErrIncomplete, and a
//     refusal of a prefix is the refusal of the whole (FuzzParse).
//   - What AppendV1 and AppendV2 write, Parse reads back as the same
//     addresses and authority (FuzzParse, TestRoundTrip).
package proxyproto
