package proxy

// HTTP2Supported says whether the data plane speaks HTTP/2: binds of a
// frontend whose http.versions lists "2" offer "h2" by ALPN (core/engine
// passes it to config.OfferedALPN). The HTTP/2 mux is h2.go.
const HTTP2Supported = true
