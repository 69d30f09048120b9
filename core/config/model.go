package config

// The desired-state model. JSON field names are part of the public contract
// (DESIGN.md "Admin API contract"): snake_case, durations as integers with a
// _ms suffix, sizes in bytes. A Config value handed to the data plane is
// immutable: whoever wants to change it makes a deep copy with Clone.

// Modes of frontends and backends.
const (
	ModeTCP  = "tcp"
	ModeHTTP = "http"
)

// Splice policies of a frontend (seed 003).
const (
	SpliceOff  = "off"
	SpliceAuto = "auto"
	SpliceOn   = "on"
)

// Balance algorithms of a backend.
const (
	BalanceRoundRobin = "roundrobin"
	BalanceLeastConn  = "leastconn"
	BalanceSource     = "source"
	BalanceRandom     = "random"
)

// Administrative states of a server.
const (
	AdminReady = "ready"
	AdminDrain = "drain"
	AdminMaint = "maint"
)

// Accept distribution algorithms (seed 001).
const (
	DistP2CRR      = "p2c-rr"
	DistRoundRobin = "round-robin"
	DistLeastConn  = "least-conn"
	DistLocal      = "local"
	// DistP2C is pure power of two choices (two distinct random loops,
	// the lower load wins): HAProxy's distribution before seed 001, kept
	// to compare with p2c-rr (make bench's seed001 rows).
	DistP2C = "p2c"
)

// Health check types.
const (
	CheckTCP  = "tcp"
	CheckHTTP = "http"
)

// CPU map modes and IRQ policies.
const (
	CPUMapNone   = "none"
	CPUMapAuto   = "auto"
	CPUMapManual = "manual"

	IRQPolicyNone     = "none"
	IRQPolicySeparate = "separate"
)

// Config is the whole desired state of the appliance.
type Config struct {
	// Generation increases by one on every accepted write. It is set by the
	// store, never by clients (a client-supplied value is ignored).
	Generation int64 `json:"generation"`
	// Schema is the version of the document's format (SchemaVersion).
	// Normalize sets it; a client-supplied value is ignored. A stored
	// document of an older schema is migrated when it is loaded
	// (Migrate, migrate.go).
	Schema    int        `json:"schema" example:"1"`
	Frontends []Frontend `json:"frontends" validate:"dive"`
	Backends  []Backend  `json:"backends" validate:"dive"`
	Tuning    Tuning     `json:"tuning"`
	CPUMap    CPUMap     `json:"cpu_map"`
	IRQ       IRQ        `json:"irq"`
	// Certificates are the TLS certificates' metadata (certs.go); their
	// chains and keys are files of the state directory, never in here.
	Certificates []Certificate `json:"certificates" validate:"dive"`
	// Nodes are node-local settings keyed by node name (--node-name): on
	// that node, a member of its section replaces the document's
	// tuning.nbthread, cpu_map or irq, because machines differ.
	Nodes map[string]NodeSettings `json:"nodes,omitempty"`
}

// NodeSettings are the settings of one node of a cluster that differ from
// the document's. A member left out takes the document's value.
type NodeSettings struct {
	// Nbthread replaces tuning.nbthread on this node (0: its CPU count).
	Nbthread *int `json:"nbthread,omitempty" validate:"omitempty,gte=0,lte=1024" example:"4"`
	// CPUMap replaces cpu_map on this node.
	CPUMap *CPUMap `json:"cpu_map,omitempty"`
	// IRQ replaces irq on this node.
	IRQ *IRQ `json:"irq,omitempty"`
}

// Frontend accepts client connections on its binds and hands them to a backend.
type Frontend struct {
	Name           string            `json:"name" validate:"required"`
	Mode           string            `json:"mode" validate:"omitempty,oneof=tcp http"`
	Binds          []Bind            `json:"binds" validate:"dive"`
	Routes         []Route           `json:"routes" validate:"dive"`
	DefaultBackend string            `json:"default_backend,omitempty"`
	Maxconn        int               `json:"maxconn" validate:"gte=0,lte=10000000"`
	Splice         string            `json:"splice" validate:"omitempty,oneof=off auto on"`
	Timeouts       FrontendTimeouts  `json:"timeouts"`
	HTTP           *FrontendHTTPOpts `json:"http,omitempty"`
	// Rules are request and response rules (rules.go); nil: none.
	Rules *Rules `json:"rules,omitempty"`
	// AccessLog writes one compact log line per connection (tcp) or
	// request (http), formatted off the loop threads; lines that cannot
	// be queued fast enough are dropped and counted.
	AccessLog bool `json:"access_log" validate:"boolean"`
	// Limits are the per-client limits (stick tables) of the frontend
	// (stick.go); none by default.
	Limits []Limit `json:"limits,omitempty" validate:"dive"`
}

// FrontendTimeouts are client-side timeouts in milliseconds (0 = default).
type FrontendTimeouts struct {
	ClientMs        int `json:"client_ms" validate:"gte=0,lte=86400000"`
	HTTPRequestMs   int `json:"http_request_ms" validate:"gte=0,lte=86400000"`
	HTTPKeepAliveMs int `json:"http_keep_alive_ms" validate:"gte=0,lte=86400000"`
	TunnelMs        int `json:"tunnel_ms" validate:"gte=0,lte=86400000"`
	// HandshakeMs bounds how long a tcp frontend with SNI routes waits for
	// the client's whole ClientHello before it closes the connection
	// (HAProxy's tcp-request inspect-delay), how long a TLS handshake on a
	// bind with tls may take, from accept to its end, and how long a bind
	// with accept_proxy waits for the PROXY header. Defaulted only on such
	// frontends (5 000).
	HandshakeMs int `json:"handshake_ms" validate:"gte=0,lte=86400000"`
}

// FrontendHTTPOpts are the http-mode options of a frontend.
//
// Each member missing from the object takes its own default (a member is
// never defaulted by the presence of another): x_forwarded_for true, the
// others false and 0. XForwardedFor is a pointer for that reason, so that
// {"max_body_size":100} is told from an explicit false; Normalize fills it,
// and a stored document always says it.
type FrontendHTTPOpts struct {
	// XForwardedFor appends the client's address as a new X-Forwarded-For
	// field (default true; HAProxy's option forwardfor).
	XForwardedFor   *bool `json:"x_forwarded_for" example:"true"`
	XForwardedProto bool  `json:"x_forwarded_proto"`
	Via             bool  `json:"via"`
	// MaxBodySize bounds request bodies in bytes (413 beyond); 0 = unlimited.
	MaxBodySize int64 `json:"max_body_size" validate:"gte=0"`
	// Versions are the HTTP versions the frontend's binds speak, "1.1"
	// and "2" (default both, on clear and TLS binds alike): HTTP/2 by
	// ALPN "h2" on TLS binds, by prior knowledge (h2c) on clear ones. On
	// a TLS bind whose tls.alpn is not set the ALPN list offered is
	// derived from them, h2 first (see OfferedALPN).
	Versions []string `json:"versions" enums:"1.1,2" example:"1.1,2"`
	// H2 are the HTTP/2 settings advertised to clients (SETTINGS frame).
	H2 FrontendH2 `json:"h2"`
}

// HTTP versions of FrontendHTTPOpts.Versions.
const (
	HTTPVersion11 = "1.1"
	HTTPVersion2  = "2"
)

// FrontendH2 are the HTTP/2 settings of an http frontend, sent in its
// SETTINGS frame (RFC 9113 §6.5.2); a member absent or 0 takes its
// default. A change applies to connections accepted after it.
type FrontendH2 struct {
	// MaxConcurrentStreams bounds the streams a client may have open at
	// once on one connection (default 100, 1-1000). Each stream is a
	// request forwarded over its own HTTP/1.1 server connection, so this
	// bounds the server connections one client connection can hold.
	MaxConcurrentStreams int `json:"max_concurrent_streams" validate:"gte=1,lte=1000" example:"100"`
	// InitialWindowSize is each stream's flow-control window in bytes:
	// the request body a stream may send ahead of what was forwarded
	// (default 65535, the RFC's; 1024 to 2^31-1).
	InitialWindowSize int `json:"initial_window_size" validate:"gte=1024,lte=2147483647" example:"65535"`
	// MaxFrameSize is the largest frame payload accepted in bytes
	// (default and minimum 16384, at most 16777215: RFC 9113 §6.5.2).
	MaxFrameSize int `json:"max_frame_size" validate:"gte=16384,lte=16777215" example:"16384"`
	// MaxHeaderListSize bounds a request's header list in bytes as RFC
	// 9113 §6.5.2 counts it (names, values and 32 bytes per field;
	// default 16384, 1024 to 1048576). 431 beyond.
	MaxHeaderListSize int `json:"max_header_list_size" validate:"gte=1024,lte=1048576" example:"16384"`
}

// ForwardFor reports whether X-Forwarded-For is appended: its default
// (true) when x_forwarded_for is unset.
func (o *FrontendHTTPOpts) ForwardFor() bool {
	return o.XForwardedFor == nil || *o.XForwardedFor
}

// Bind is one listening address of a frontend.
type Bind struct {
	Name string `json:"name" validate:"required"`
	// Address is an IP literal, "*" (0.0.0.0) or "${NODE_ADDRESS}",
	// replaced on each node by its --node-address.
	Address string `json:"address" validate:"required"`
	Port    int    `json:"port" validate:"gte=1,lte=65535"`
	// Shards > 0 opens that many SO_REUSEPORT sockets, one per loop, and lets
	// the kernel spread connections; 0 uses one socket and the accept
	// distributor.
	Shards  int   `json:"shards" validate:"gte=0,lte=1024"`
	Backlog int   `json:"backlog" validate:"gte=0,lte=1000000"`
	Threads []int `json:"threads,omitempty" validate:"dive,gte=0,lte=1023"`
	// TLS terminates TLS on this bind (tcp and http frontends); absent:
	// plain TCP.
	TLS *BindTLS `json:"tls,omitempty"`
	// AcceptProxy reads a PROXY protocol header (v1 or v2) at the start of
	// every connection of this bind, before TLS and before any request:
	// the client address it carries replaces the peer's everywhere
	// (routing, X-Forwarded-For, balance=source, the access log, which
	// keeps the peer too). Absent: no header is read.
	AcceptProxy *AcceptProxy `json:"accept_proxy,omitempty"`
}

// AcceptProxy says who may send a PROXY protocol header to a bind.
type AcceptProxy struct {
	// Trusted lists the peers (load balancers) allowed to connect to the
	// bind, as CIDR prefixes or single IP addresses: a connection from any
	// other peer is closed at once and counted (proxy.refused). The
	// header must arrive within the frontend's handshake_ms (5 000 by
	// default on a frontend with such a bind); a malformed, truncated or
	// oversized one closes the connection and is counted (proxy.invalid).
	Trusted []string `json:"trusted" validate:"required,min=1,max=1024" example:"10.0.0.0/8"`
}

// TLS protocol versions of BindTLS.MinVersion.
const (
	TLSVersion10 = "1.0"
	TLSVersion11 = "1.1"
	TLSVersion12 = "1.2"
	TLSVersion13 = "1.3"
)

// Client certificate policies of BindTLS.ClientAuth.
const (
	ClientAuthRequired = "required"
	ClientAuthOptional = "optional"
)

// BindTLS is the TLS termination of a bind (core/tlsconf builds the
// crypto/tls configuration from it). Normalize fills min_version, ciphers,
// client_auth and client_cert_header_prefix (with client_ca); not alpn,
// so that a stored alpn is always one a client set.
type BindTLS struct {
	// Certificates names entries of /certificates. The certificate served
	// is chosen by the client's SNI: a SAN equal to it (case-insensitive),
	// then a wildcard SAN matching it, then the first of this list; among
	// several matching one name (an ECDSA and an RSA one), the first the
	// client supports.
	Certificates []string `json:"certificates" example:"site"`
	// ALPN lists the protocols offered, in preference order. Unset on an
	// http frontend: derived from its http.versions when the bind is
	// applied (h2 first, then http/1.1: OfferedALPN); set, it wins, and
	// each entry (h2, http/1.1, http/1.0) must be of a version the
	// frontend speaks. On a tcp frontend any token; unset, none.
	ALPN []string `json:"alpn,omitempty" example:"h2,http/1.1"`
	// MinVersion is the oldest protocol version accepted: "1.0", "1.1",
	// "1.2" (default) or "1.3". The newest is always TLS 1.3.
	MinVersion string `json:"min_version" validate:"omitempty,oneof=1.0 1.1 1.2 1.3" example:"1.2"`
	// Ciphers are the TLS 1.0-1.2 cipher suites, named as Go names them
	// (TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256...). Default: the ECDHE
	// suites with AEAD ciphers (AES-GCM and ChaCha20-Poly1305, for ECDSA
	// and RSA keys), no CBC. TLS 1.3 suites are not configurable (Go's
	// crypto/tls always offers its three).
	Ciphers []string `json:"ciphers,omitempty"`
	// ClientCA holds one or more PEM CA certificates (at most 64 KiB):
	// client certificates are then requested and verified against them
	// (mTLS).
	ClientCA string `json:"client_ca,omitempty"`
	// ClientAuth is "required" (default with client_ca: a client without
	// a valid certificate fails the handshake) or "optional" (a
	// certificate, if sent, must be valid). Only with client_ca.
	ClientAuth string `json:"client_auth,omitempty" validate:"omitempty,oneof=required optional" example:"required"`
	// ClientCertHeaderPrefix (http frontends with client_ca; default
	// "X-Client-Cert-") names the request headers carrying the client
	// certificate to the server: <prefix>Subject, <prefix>Issuer,
	// <prefix>SHA256 and <prefix>Verified. Headers with this prefix sent
	// by the client are removed.
	ClientCertHeaderPrefix string `json:"client_cert_header_prefix,omitempty" example:"X-Client-Cert-"`
}

// Route sends matching http requests (host, path_prefix, method) or tcp
// connections (sni) to a backend; the first match wins.
type Route struct {
	// SNI (tcp mode only, and then required) matches the server name of
	// the client's TLS ClientHello: an exact lower-case host name, or
	// "*.suffix" matching one or more labels before ".suffix" (not the
	// suffix itself). The connection is forwarded without terminating TLS.
	SNI  string `json:"sni,omitempty"`
	Host string `json:"host,omitempty"`
	// PathPrefix matches the start of the request path after normalisation:
	// percent-encoded unreserved characters decoded (%2e is a dot), then
	// dot segments removed (RFC 3986 §5.2.4), so /api/../admin does not
	// match /api/; the query is not normalised, and the request is
	// forwarded as received.
	PathPrefix string `json:"path_prefix,omitempty"`
	Method     string `json:"method,omitempty"`
	Backend    string `json:"backend" validate:"required"`
}

// Backend is a pool of servers with a balance algorithm.
type Backend struct {
	Name    string `json:"name" validate:"required"`
	Mode    string `json:"mode" validate:"omitempty,oneof=tcp http"`
	Balance string `json:"balance" validate:"omitempty,oneof=roundrobin leastconn source random"`
	// Servers (this comment stands apart from the field so that the
	// OpenAPI document does not show it) are pointers to servers that are
	// never written: a *Server reachable from a published Config (the
	// store's Current, a revision, a config the data plane runs) is never
	// written. A write copies the list of pointers (Config.OwnServers, 80 KB
	// at 10 000 servers) and replaces the pointer of the server it changes
	// with one to a changed copy (Config.OwnServer), so configs share their
	// unchanged servers and the same pointer is the same server
	// (ServerSpan compares pointers first). Clone copies every server.
	// No element is nil: the decode refuses null, Validate a nil.

	Servers     []*Server       `json:"servers" validate:"dive"`
	HealthCheck *HealthCheck    `json:"health_check,omitempty"`
	Timeouts    BackendTimeouts `json:"timeouts"`
	Retries     *int            `json:"retries,omitempty" validate:"omitempty,gte=0,lte=100"`
}

// BackendTimeouts are server-side timeouts in milliseconds (0 = default).
type BackendTimeouts struct {
	ConnectMs int `json:"connect_ms" validate:"gte=0,lte=86400000"`
	ServerMs  int `json:"server_ms" validate:"gte=0,lte=86400000"`
	QueueMs   int `json:"queue_ms" validate:"gte=0,lte=86400000"`
	TunnelMs  int `json:"tunnel_ms" validate:"gte=0,lte=86400000"`
}

// Server is one origin server of a backend. Address is an IP literal or a
// host name resolved when the config is applied.
type Server struct {
	Name       string `json:"name" validate:"required"`
	Address    string `json:"address" validate:"required"`
	Port       int    `json:"port" validate:"gte=1,lte=65535"`
	Weight     *int   `json:"weight,omitempty" validate:"omitempty,gte=0,lte=256"`
	Maxconn    int    `json:"maxconn" validate:"gte=0,lte=10000000"`
	AdminState string `json:"admin_state" validate:"omitempty,oneof=ready drain maint"`
	// TLS, when set, makes the proxy a TLS client of the server (an https
	// origin): see ServerTLS.
	TLS *ServerTLS `json:"tls,omitempty"`
	// SendProxy sends a PROXY protocol header ("v1" text or "v2" binary,
	// v2 with the client's TLS server name as AUTHORITY when known) at the
	// start of each new connection to the server, before TLS, naming the
	// client the connection is for; health checks send one too (v2 LOCAL,
	// v1 UNKNOWN). In http mode such a connection carries one client's
	// requests only: it is not pooled for others. Absent: none.
	SendProxy string `json:"send_proxy,omitempty" validate:"omitempty,oneof=v1 v2" example:"v2"`
	// Proto is the HTTP version the proxy speaks to the server (http
	// backends only): "h1", HTTP/1.1, the default (absent means h1), or
	// "h2", HTTP/2 for gRPC and other origins that need it end to end
	// (trailers, te: trailers, grpc-timeout, RST_STREAM): h2c with prior
	// knowledge on a clear connection, h2 by ALPN over tls (the handshake
	// offers only "h2", and a server that does not select it fails the
	// handshake, counted as a failed connect). Requests from HTTP/1.1 and
	// HTTP/2 clients alike become streams multiplexed over the server's
	// pooled connections. Health checks of type http speak HTTP/2 to such
	// a server too, so an HTTP/1.1-only server is down. A change makes a
	// new server (no pooled connection of the other version is reused).
	Proto string `json:"proto,omitempty" validate:"omitempty,oneof=h1 h2" example:"h2"`
}

// Versions of Server.Proto.
const (
	ProtoH1 = "h1"
	ProtoH2 = "h2"
)

// Versions of Server.SendProxy.
const (
	ProxyV1 = "v1"
	ProxyV2 = "v2"
)

// HealthCheck describes how a backend probes its servers.
type HealthCheck struct {
	Type   string `json:"type" validate:"required,oneof=tcp http"`
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	// Host is the Host header of an http check: host[:port], an IP
	// literal (IPv6 in brackets) or an RFC 1123 name. Empty: the server's
	// address (or, with tls, its sni) and port, as today. tcp checks
	// ignore it.
	Host       string `json:"host,omitempty" example:"www.example.com"`
	StatusMin  int    `json:"status_min,omitempty" validate:"omitempty,gte=100,lte=599"`
	StatusMax  int    `json:"status_max,omitempty" validate:"omitempty,gte=100,lte=599"`
	IntervalMs int    `json:"interval_ms" validate:"gte=0,lte=86400000"`
	TimeoutMs  int    `json:"timeout_ms" validate:"gte=0,lte=86400000"`
	Rise       int    `json:"rise" validate:"gte=0,lte=1000"`
	Fall       int    `json:"fall" validate:"gte=0,lte=1000"`
}

// Tuning holds the global data-plane knobs. Nbthread and Maxconn use 0 for
// "derive from the machine" (CPUs in the affinity mask, RLIMIT_NOFILE), so a
// persisted config follows the machine it runs on.
type Tuning struct {
	Nbthread      int    `json:"nbthread" validate:"gte=0,lte=1024"`
	RunqueueDepth int    `json:"runqueue_depth" validate:"gte=0,lte=100000"`
	Maxpollevents int    `json:"maxpollevents" validate:"gte=0,lte=100000"`
	Sched         Sched  `json:"sched"`
	Distribution  string `json:"distribution" validate:"omitempty,oneof=p2c-rr round-robin least-conn local p2c"`
	Maxaccept     int    `json:"maxaccept" validate:"gte=0,lte=100000"`
	Bufsize       int    `json:"bufsize" validate:"gte=0,lte=16777216"`
	Pipesize      int    `json:"pipesize" validate:"gte=0,lte=67108864"`
	Maxpipes      int    `json:"maxpipes" validate:"gte=0,lte=1000000"`
	Maxconn       int    `json:"maxconn" validate:"gte=0,lte=100000000"`
	// BusyPollUs is how long, in µs, a loop with nothing left to run polls
	// without sleeping before it sleeps (HAProxy's busy-polling, bounded):
	// the next event is taken at once and nobody pays to wake the loop,
	// at the price of the CPU spent polling. 0 = off (the default).
	BusyPollUs int `json:"busy_poll_us" validate:"gte=0,lte=1000000"`
	// PollNapUs is how long, in µs, a loop whose events come fast naps on
	// its own timer before it polls, instead of sleeping until the next
	// event wakes it: the events of the nap are taken in one round and
	// nobody pays to wake the loop, at the price of up to that much
	// latency per hop under load (loop.SetPollNap). 0 = the default (20,
	// DefaultPollNapUs), -1 = off.
	PollNapUs int `json:"poll_nap_us" validate:"gte=-1,lte=10000"`
	// GraceMs bounds a stop (SIGTERM) and the drain of loops removed by a
	// smaller nbthread: idle keep-alive connections close at once, requests
	// in flight finish with Connection: close, and whatever still runs
	// after grace_ms (tcp tunnels, slow responses) is closed. HAProxy's
	// hard-stop-after. 0 = default (10 000).
	GraceMs int `json:"grace_ms" validate:"gte=0,lte=3600000"`
	// TLS tunes TLS termination.
	TLS TLSTuning `json:"tls"`
}

// TLSTuning holds the process-wide TLS knobs.
type TLSTuning struct {
	// MaxHandshakes bounds the TLS handshakes that compute at once per
	// loop (on helper goroutines; crypto/tls cannot pause one): a flood of
	// handshakes waits in the loop's FIFO queue instead of taking the CPU
	// from established connections. A handshake waiting for its peer holds
	// no slot (it is parked in Go's runtime poller), so clients that stall
	// theirs cannot delay others. 0 = default.
	MaxHandshakes int `json:"max_handshakes" validate:"gte=0,lte=100000"`
	// TicketRotationMs is how often a new session ticket key is generated
	// (when the keys are not set through /api/v1/tls/ticket-keys); the
	// three newest keys are kept, so a ticket resumes for up to about
	// three periods. 60 000 (1 min) to 604 800 000 (1 week); 0 = default (1 h).
	TicketRotationMs int `json:"ticket_rotation_ms" validate:"gte=60000,lte=604800000"`
}

// Sched is the CPU-budget split between tasklet classes, in percent (seed 000).
type Sched struct {
	Urgent int `json:"urgent" validate:"gte=0,lte=100"`
	Normal int `json:"normal" validate:"gte=0,lte=100"`
	Bulk   int `json:"bulk" validate:"gte=0,lte=100"`
}

// CPUMap pins loop threads to CPUs.
type CPUMap struct {
	Mode    string       `json:"mode" validate:"omitempty,oneof=none auto manual"`
	Threads []ThreadCPUs `json:"threads,omitempty" validate:"dive"`
}

// ThreadCPUs is the CPU set of one loop thread.
type ThreadCPUs struct {
	Thread int   `json:"thread" validate:"gte=0,lte=1023"`
	CPUs   []int `json:"cpus" validate:"required,min=1,dive,gte=0,lte=4095"`
}

// IRQ is the interrupt placement policy and explicit pins.
type IRQ struct {
	Policy string   `json:"policy" validate:"omitempty,oneof=none separate"`
	NICs   []string `json:"nics,omitempty"`
	Pins   []IRQPin `json:"pins,omitempty" validate:"dive"`
}

// IRQPin sets the affinity of one IRQ.
type IRQPin struct {
	IRQ  int   `json:"irq" validate:"gte=0"`
	CPUs []int `json:"cpus" validate:"required,min=1,dive,gte=0,lte=4095"`
}
