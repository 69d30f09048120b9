// Package config owns the desired-state model of spliced: the Config document
// with its frontends, binds, routes, backends, servers, health checks,
// timeouts, tuning, CPU map and IRQ policy; its defaults (Normalize), its
// strict decoding (Decode), its validation (field rules through
// go-playground/validator plus semantic rules), the diff between two
// documents as a plan, and the store that persists revisions: in the state
// directory of one node, or in etcd for several (through Storage).
//
// It imports no other spliced package; every other package imports it.
// Config values handed to the data plane are immutable snapshots: nobody
// mutates a *Config after it was passed to Control.Apply. It must not touch
// the network or the data plane; it only describes them.
//
// Callers: the API (any goroutine, writes serialised by the store's lock) and
// the data plane (reads snapshots only). Validate, Diff and Decode are pure
// and safe from any goroutine.
//
// # Defaults
//
// Normalize fills every default (defaults.go: each constant says what it
// buys) once, where a config enters: loading config.json or the bootstrap
// document, every store write (after the client's change is applied),
// reading a revision (diff, restore), and spliced validate. Everything
// downstream (Validate, Diff, the engine, loop, listen, proxy) receives
// normalized configs and fills no default of its own, so a default is
// changed in one place.
//
// The effective values are stored and shown: config.json, the revisions
// and every GET carry the filled-in values, not the client's omissions.
// This is the choice of an appliance whose API is its only configuration
// surface: what GET returns is what runs (reading a config never needs the
// defaults table), a revision diff names every value that changed, and an
// upgrade whose defaults differ does not silently change a running
// appliance — its stored values stay; only objects created afterwards (or
// fields a client clears to zero) take the new defaults. Fields added by a
// later version are filled when an older document is loaded.
//
// # Schema and migrations
//
// A document carries its format version, schema (SchemaVersion, set by
// Normalize). When a change of meaning cannot be expressed as a default
// of a new field (a stored value that used to be a default and must now be
// told from a client's), SchemaVersion grows and Migrate gets a step that
// rewrites documents of the older schema; every loader of stored documents
// (config.json and the revisions here, core/cluster's etcd
// revisions and node copy) calls Migrate between decoding and Normalize.
// Documents clients send (PUT /config, the bootstrap file, spliced
// validate) are in the current format and are not migrated. Steps are
// listed at SchemaVersion (migrate.go); the first: schema 0 → 1 drops the
// alpn ["http/1.1"] that Normalize used to store on TLS binds of http
// frontends, so that their list is derived from http.versions
// (OfferedALPN).
//
// # Decoding
//
// Decode accepts exactly one JSON value of valid UTF-8, nested at most
// MaxDepth (32) levels, whose object members match the target's JSON field
// names exactly (case-sensitive, unknown members refused) and whose numbers
// fit their fields. Failures are *DecodeError with a JSON pointer and a code
// (empty, syntax, utf8, depth, trailing_data: not JSON, 400; unknown_field,
// type: JSON of the wrong shape).
//
// # Validation
//
// Validate reports every problem at once as a *ValidationError of FieldErrors
// {field: JSON pointer into the whole document, code, message}, in document
// order. Codes: required, one_of, out_of_range, format, duplicate,
// unknown_reference, mode_mismatch, sum, cpu_unknown, address_conflict,
// fd_limit, invalid. When every problem is a duplicate or an address_conflict the
// error unwraps to ErrConflict (409: the document clashes with what exists),
// otherwise to ErrInvalid (422). The rules:
//
//   - Names of frontends, binds, backends and servers are DNS-label-like:
//     1 to 63 characters of [a-z0-9_-], starting and ending with a letter or
//     digit (lower case only, so a name is also a valid URL path segment and
//     there is one spelling per object). Frontend and backend names are
//     unique in the document, bind names within their frontend, server names
//     within their backend.
//   - default_backend and route backends name an existing backend of the
//     same mode as the frontend. An http route host is a host name, an IP
//     literal or "*.suffix"; path_prefix starts with "/"; method is an HTTP
//     token; sni is refused. A tcp route has sni only (required): a
//     lower-case host name or "*." followed by one, once per frontend. A frontend without default_backend and
//     routes is valid (built up step by step); it refuses connections.
//   - A bind address is an IP literal, "*" (all IPv4 addresses, 0.0.0.0)
//     or "${NODE_ADDRESS}" (NodeAddress, each node's own: see Node-local
//     settings); no two binds anywhere share address:port, and the
//     unspecified address of a family overlaps every address of that family
//     on the same port. "${NODE_ADDRESS}" overlaps itself and the
//     unspecified address of either family on the same port, not other
//     literals (each node checks those in ForNode's result).
//     Bind threads are unique and below the effective nbthread.
//   - A server address is an IP literal or an RFC 1123 host name (resolved at
//     apply time); ports are 1-65535, weights 0-256. A server's tls
//     (ServerTLS, servertls.go): verify is required (default) or none;
//     ca_pem, with verify required only, is 1 or more PEM CERTIFICATE
//     blocks of at most 64 KiB (ParseCAPEM); sni is a host name. Health
//     checks of a TLS server run over TLS (core/proxy/check.go).
//   - sched shares add up to 100; bufsize ≥ 1024; pipesize 0 or ≥ 4096.
//   - tuning.maxconn fits in Env.FdLimit (the process's RLIMIT_NOFILE; 0
//     skips it): FdBudget.Fds(maxconn) ≤ FdLimit (limits.go: 2 fds per
//     connection and per pipe, per loop, per listening socket, per
//     health-checked server, and FdReserve), else fd_limit with the limit and the largest maxconn
//     that fits.
//   - Health checks: timeout_ms ≤ interval_ms, status_min ≤ status_max, http
//     checks have a path starting with "/" and a token method.
//   - cpu_map: mode manual needs threads, other modes take none; thread ids
//     are unique and below the effective nbthread (tuning.nbthread, or the
//     number of online CPUs when it is 0 and the Env is known). Every CPU in
//     cpu_map and in IRQ pins is online (skipped with an empty Env). IRQ
//     numbers in pins are unique; irq.nics are interface names.
//   - A bind's tls (bindtls.go): certificates names 1+ existing
//     certificates, each once; alpn entries are 1-255 bytes, unique, at most
//     16, and in http mode h2, http/1.1 or http/1.0, each of a version the
//     frontend's http.versions lists (h2 needs "2", http/1.x "1.1");
//     min_version is 1.0-1.3; ciphers are TLS 1.0-1.2
//     suites as Go names them (TLS 1.3 suites are not configurable), and
//     a min_version below 1.2 needs one usable at that version;
//     client_ca is at most 64 KiB of PEM CERTIFICATE blocks that parse;
//     client_auth (required, optional) and client_cert_header_prefix (an
//     HTTP token, http mode only) need client_ca. A tcp frontend with SNI
//     routes forwards TLS untouched and cannot have a tls bind.
//   - tuning.tls.ticket_rotation_ms is 1 min to 1 week.
//   - A frontend's http.versions (httpversions.go) lists "1.1" and "2",
//     each once, at least one; http.h2's max_concurrent_streams is
//     1-1000, initial_window_size 1024 to 2^31-1, max_frame_size 16384
//     to 2^24-1, max_header_list_size 1024 to 1 MiB.
//   - nodes: names as above; in each section, nbthread is 0-1024 and
//     cpu_map and irq follow the rules of the document's, for the values
//     that node runs (its section over the document's: bind and cpu_map
//     threads below its nbthread, irq policy separate needs its loops
//     pinned). CPUs are checked against the Env only in the section of
//     Env.NodeName, and the document's nbthread, cpu_map and irq only
//     where that section does not replace them.
//   - certificates: names as above, unique; chain_sha256 is 64 hex digits.
//     ParseCertificate checks an upload (certs.go): PEM, key matching the
//     leaf, validity dates, a chain that links, supported keys.
//
// # Certificates
//
// The document holds certificate metadata only (Certificate: subject, SANs,
// issuer, dates, fingerprints, key type, chain length), never a key, so
// revisions, diffs and audit entries are key-free. The chain and key are
// the file certs/<chain_sha256>.pem of the state directory (0600, directory
// 0700), written atomically by Update (UpdateOptions.Certificates) before
// the revision that refers to it, never rewritten with other content and
// kept while the current config or any kept revision refers to it, so every
// kept revision can be restored with its certificates. Files nothing refers
// to any more are removed at Open and after a write that replaces or
// deletes a certificate (pruneCertificates), so an old key does not outlive
// the history that can bring it back by more than one such write.
// Update refuses a certificate that is new or changed and whose file is
// missing (unknown_reference) or yields other metadata (invalid).
// CertificateUsers is the one place references are found (binds' tls
// certificates); the API's delete check (409) and used_by read it.
//
// # Node-local settings
//
// One document runs on every node of a cluster; Config.Nodes holds, per
// node name (--node-name), the settings that differ because machines do:
// nbthread, cpu_map and irq, each optional (absent: the document's
// tuning.nbthread, cpu_map, irq). A bind address "${NODE_ADDRESS}" is
// each node's --node-address. ForNode (nodes.go) makes the config a node
// runs; it returns the document itself when neither applies, and an
// error when "${NODE_ADDRESS}" is used by a node started without
// --node-address. The node validates the result with its own Env.
//
// # Plans
//
// Diff compares two normalized configs object by object (matched by name)
// and lists create, update and delete items with how the data plane applies
// each: in_place, rebind (listening sockets change) or restart_loops
// (nbthread changes). See Diff for the order.
//
// # Store
//
// Store is the façade the API and cmd/spliced use (Current, Update,
// Revisions, Revision, CertificateBundle, StorageHealth, Refresh) over a
// Storage, which keeps the documents and never validates them. Two
// implementations pass the same contract tests (core/config/storetest):
// DirStorage, the state directory described below (Open, the default: one
// node, `make run`), and core/cluster's EtcdStorage (several nodes, one
// configuration). Storage.Commit is conditional: generation N+1 is
// committed only if N is still current, else ErrRace and nothing is
// written. An Update builds its write on Current (clone, mutate, Normalize,
// Validate, certificate checks, Diff) and commits it on Current's
// generation; one that lost to another writer refreshes Current from the
// storage and runs again, mutate included (mutate must be repeatable), at
// most MaxUpdateAttempts (100) times, then fails with an error wrapping
// ErrRace. With UpdateOptions.Apply (one node), a failed apply reverts the
// commit (Storage.Revert); without it (cluster mode) the committed
// generation simply becomes Current: a committed write is never reverted,
// each node applies what it reads. Refresh loads the storage's current
// document and adopts it when its generation is newer than Current's,
// never older. OpenStore over an empty storage commits the bootstrap
// document as generation 1 on 0; if another node seeded the storage first,
// what it wrote is loaded instead. Dir is "" for a storage other than
// DirStorage.
//
// The state directory holds config.json, a snapshot: the whole config as
// indented JSON with its generation, and revisions/, one file per accepted
// generation named by the zero-padded generation (00000000000000000042.json,
// so lexical order is generation order) holding
// {"generation", "time" (UTC), "summary" (the plan on one line), "actor"
// (who wrote it: UpdateOptions.Actor, the API's token name), "node" (the
// node that took the write, cluster mode), "restore_of" (the generation a
// restore brought back), then either "config" (the whole document) or
// "base" and "delta" (the change from generation base, the one before:
// Delta)}, the last three of the header absent when empty (and in files
// older than them); at each snapshot the newest 100 are kept, and the
// revisions back to the whole one the oldest kept delta is built on. Every file is written
// atomically (temporary file in the same directory, fsync, rename, fsync
// of the directory), but for the journal and the copies below. A write
// (CommitDelta) is one line appended to the journal (journal.NNNN) and
// fdatasynced, its commit point, the line being its delta revision, also
// written to revisions/ as a copy without fsync; every SnapshotEvery (32)
// generations a goroutine writes that generation whole (revision, then
// config.json) after the commit returned, then removes the journal files
// config.json covers (journal.go). When the change moves an object, or
// config.json is of an older schema, the write is whole: the whole
// revision, then config.json, the commit point (the committed generation
// is kept in memory, LockDir making the process the directory's only
// writer). At Open, config.json is read and the journal's lines after it
// applied in order (and the delta revision files of a spliced before the
// journal); temporary files and a whole revision newer than
// config.json (a snapshot whose config.json was not renamed) are leftovers
// of an interrupted write and are removed. Revision(N) rebuilds N from the
// whole revision before it and the deltas up to N. A config.json that does not decode or validate stops the start
// with ErrCorrupt, naming the file and the newest readable revision; it is
// never reset silently. config.json and revision files are read with
// O_NOFOLLOW and revisions/ must be a real directory: a symbolic link
// planted there is refused, never followed (writes replace names by
// rename, which never follows one). One process owns a state directory:
// LockDir takes an flock on spliced.lock (holding the owner's PID) that
// cmd/spliced keeps for its lifetime.
//
// A write the OS refuses (ENOSPC, EDQUOT, EROFS, EACCES, EIO...) makes
// Update return a *StorageError (Full for space or quota) and change
// nothing; StorageHealth reports that fault until a write succeeds again,
// an Update or the probe StorageHealth makes at most once a second.
//
// Each accepted Update that changes something creates exactly one
// generation. An Update whose plan is empty (a PUT of the same document, a
// PATCH that sets a value to what it already is) creates no generation: it
// returns the current generation and the empty plan, writes nothing and
// applies nothing. A dry run returns the current generation and the plan.
package config
