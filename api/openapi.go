package api

// General information of the OpenAPI document. `make openapi` (scripts/
// openapi.sh) runs swag over this package; the lines below and the
// annotations on each handler are the source of openapi/openapi.json.
//
//	@title						spliced admin API
//	@version					1
//	@description				REST admin API of spliced, a TCP/HTTP reverse-proxy appliance. Every write is validated, persisted as a new generation and applied to the data plane before the answer; every write accepts ?dry_run=true (answer: the plan). Query strings are strict: a parameter the operation does not declare (every write takes dry_run and wait_ms), one given twice, or a malformed query string is a 400 bad-query problem naming it. GETs return strong ETags; writes honour If-Match (412). PATCH is a JSON merge patch (RFC 7386). Errors are RFC 9457 problem documents (application/problem+json) whose errors[].field are JSON pointers into the request body. An unknown path answers 404, a known path with a method it does not take 405 with Allow. Security: once a token exists (spliced token add), every operation except the public ones needs Authorization: Bearer <token> (401 without, 429 with Retry-After after repeated failures); x-spliced-role on each operation is the least role it needs: viewer (reads, except the audit log), operator (viewer + a server's admin_state and weight: PUT/PATCH of a server changing anything else is 403), admin (everything), public (no token). While no token exists a loopback or unix admin address is open (role admin). Requests whose Host is not the admin address, or whose Origin is not its own origin, are refused (403). Several nodes, one configuration (--store etcd://…): a write on any node is committed to the store (503 store-unavailable when it cannot be reached, 409 write-race when other writes kept committing first), applied by that node, and answered after every live node applied or refused it, or after ?wait_ms= (0..30000, default 2000; every write takes it): the body's nodes member and the X-Spliced-Nodes-Applied, X-Spliced-Nodes-Refused and X-Spliced-Nodes-Pending headers (comma-separated node names) say which. A committed write answers 2xx even when nodes refused it. Reads served while the store cannot be reached carry X-Spliced-Stale: true.
//	@BasePath					/
//	@schemes					http https
//	@tag.name					config
//	@tag.description			The whole document and its revisions.
//	@tag.name					frontends
//	@tag.description			Listeners' owners: mode, binds, routes, default_backend, maxconn, timeouts, splice.
//	@tag.name					binds
//	@tag.description			Listening addresses of a frontend.
//	@tag.name					backends
//	@tag.description			Server pools: mode, balance, timeouts, health check.
//	@tag.name					servers
//	@tag.description			Origin servers of a backend: address, weight, maxconn, admin_state.
//	@tag.name					certificates
//	@tag.description			TLS certificates: upload a chain and its key (stored 0600 in the state directory), read their metadata; a key is never answered.
//	@tag.name					tls
//	@tag.description			Session ticket keys shared by every TLS bind (set them alike on several nodes to resume each other's sessions); a key is never answered.
//	@tag.name					tuning
//	@tag.description			Global data-plane knobs.
//	@tag.name					placement
//	@tag.description			Where the loop threads run (CPU map) and which CPUs serve each IRQ.
//	@tag.name					observability
//	@tag.description			Traffic statistics, per-loop activity, live events, the audit trail and Prometheus metrics.
//	@tag.name					cluster
//	@tag.description			The nodes sharing this configuration (one on a single node): the store, each node's running generation and state.
//	@tag.name					info
//	@tag.description			This server and this API's document.
//	@tag.name					health
//	@tag.description			Liveness and readiness probes (no token needed).
