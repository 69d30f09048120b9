package proxy

// HTTP2Supported says whether the data plane speaks HTTP/2. It is the
// transitional guard of the HTTP/2 work (issue 25): the configuration
// (http.versions, http.h2) and the data-plane inputs (HTTPFront.Versions
// and H2, http_route.go) exist before the HTTP/2 mux does, and while this
// is false no bind offers "h2" by ALPN (core/engine passes it to
// config.OfferedALPN, which drops "h2" from derived and set lists
// alike): a client that negotiated h2 would receive HTTP/1.1 bytes it
// cannot read. Clear binds need no guard: until the mux exists, an h2c
// client's preface ("PRI * HTTP/2.0") is refused by the HTTP/1.1 parser
// (505), as before. The change that brings the HTTP/2 mux sets it to
// true (and removes this paragraph).
const HTTP2Supported = false
