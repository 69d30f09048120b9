// Package rules compiles a frontend's request and response rules
// (config.Rules) into a form the data plane evaluates per request
// without allocating, taking a lock or looking anything up by string,
// and holds the byte operations of their actions (the answers of deny and
// redirect, the fields set, added and removed, the path rewritten).
//
// Compile runs on the control path (any goroutine) once per generation in
// which a frontend's rules changed; the Set it returns is immutable but for
// its per-loop hit counters, which loop i writes in its own cache lines
// only. Eval, Precompute and the Append functions run on the loop thread
// of the request, with a Result (and its bit set) that the caller owns.
//
// # What the conditions compare
//
// A rule's when holds when every member holds (absent: always):
//   - host: the request's Host without its port and trailing dot,
//     case-insensitively; "*.example.com" matches a.example.com, not
//     example.com (as routes).
//   - path, path_prefix: the request path normalised as routes normalise
//     it (unreserved %XX decoded, dot segments removed), the query left
//     out; path is compared exactly, path_prefix as a prefix.
//   - method: exactly.
//   - header: in request rules the request's fields, in response rules the
//     response's; the name case-insensitively, equals and prefix
//     case-sensitively against each field of that name (one is enough);
//     present: one exists.
//   - query: a parameter of the raw query string (as sent, no
//     percent-decoding): one named so exists, and has that value when
//     equals is given.
//   - src: the client's address (the PROXY header's, when a bind accepts
//     one) is in one of the prefixes.
//   - tls: whether the client connection is TLS; sni: the server name of
//     its ClientHello, case-insensitively, "*.suffix" as host.
//   - status (response rules): the response's status code.
//   - not: holds when its own members do not all hold.
//
// Conditions see the request as the client sent it: a set_header of an
// earlier rule is not seen by a later rule's header condition, and routes
// match the path as received (so that a route on /api/ and a strip_prefix
// of /api go together). Response rules may test the request (host, path,
// method, query): those members are evaluated when the request head is
// complete (Precompute) and their results carried to the response.
//
// # What the actions do
//
// In order, the first deny or redirect ends the phase; every other
// matching rule acts: the first use_backend picks the backend (routes are
// not tried), set_header/add_header/del_header change the fields
// forwarded, set_path/strip_prefix change the path forwarded (in rule
// order, the query kept), limit sends the request to a limit of the
// frontend. Header actions never name a field that frames the message or
// belongs to the connection (config validation refuses them), and their
// names and values are checked for CR, LF, NUL and non-token characters,
// so no rule can inject a field or split a message.
package rules
