package proxy

import (
	"strconv"

	"github.com/spliced-proxy/spliced/core/http1"
)

// HTTPChallenges answers ACME http-01 challenges (RFC 8555 §8.3): the key
// authorization of a token spliced's ACME issuer (core/acme) is proving.
// Called on loop threads for requests under ACMEChallengePath only: it
// must not block (core/acme reads an atomically swapped map).
type HTTPChallenges interface {
	KeyAuthorization(token string) (string, bool)
}

// ACMEChallengePath is where an ACME server fetches http-01 tokens.
const ACMEChallengePath = "/.well-known/acme-challenge/"

// acmeChallenge answers a GET of ACMEChallengePath + token the issuer is
// proving with 200 and the key authorization, before limits, rules and
// routes (a rule or a route must not keep the CA from the token). Any
// other request (another path, an unknown token: a stale validation or a
// site's own file under that path) goes on as usual. The cost on other
// requests is one prefix comparison; string(token) in the map index does
// not allocate.
func (c *stream) acmeChallenge(buf []byte, r *http1.Request) bool {
	t := buf[r.Target.Off : r.Target.Off+r.Target.Len]
	if len(t) <= len(ACMEChallengePath) || string(t[:len(ACMEChallengePath)]) != ACMEChallengePath {
		return false
	}
	if r.MethodID != http1.MethodGET {
		return false
	}
	ka, ok := c.fe.ACME.KeyAuthorization(string(t[len(ACMEChallengePath):]))
	if !ok {
		return false
	}
	// The answer is only needed during fail's call: the loop holds it
	// (not the stream, which is at its size class's limit).
	c.w.acmeAnswer = ka
	c.fail(200) // the proxy's own answer: appendAnswer writes it
	c.w.acmeAnswer = ""
	return true
}

// appendACMEAnswer is the 200 acmeChallenge answers with.
func (c *stream) appendACMEAnswer(dst []byte) []byte {
	dst = append(dst, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nCache-Control: no-store\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(c.w.acmeAnswer)), 10)
	dst = append(dst, "\r\n\r\n"...)
	return append(dst, c.w.acmeAnswer...)
}
