package redact

import "testing"

func TestRequestLineRedactsCredentials(t *testing.T) {
	secret := "spliced_" + "Zq0123456789abcdefghijklmnopqrstuvwxyz"
	for in, want := range map[string]string{
		"GET / HTTP/1.1":                               "GET / HTTP/1.1",
		"GET /x?a=1&b=2 HTTP/1.1":                      "GET /x?a=1&b=2 HTTP/1.1",
		"GET /x?token=abc&b=2 HTTP/1.1":                "GET /x?token=REDACTED&b=2 HTTP/1.1",
		"GET /x?access_token=abc HTTP/1.0":             "GET /x?access_token=REDACTED HTTP/1.0",
		"GET /x?k=spliced_abc HTTP/1.1":                "GET /x?k=REDACTED HTTP/1.1",
		"GET /a/" + secret + "/b HTTP/1.1":             "GET /a/REDACTED/b HTTP/1.1",
		"GET http://u:pw@h.example/p?token=1 HTTP/1.1": "GET http://REDACTED@h.example/p?token=REDACTED HTTP/1.1",
		"GET http://h.example HTTP/1.1":                "GET http://h.example HTTP/1.1",
		"OPTIONS * HTTP/1.1":                           "OPTIONS * HTTP/1.1",
		"GET /cut?token=abcdef":                        "GET /cut?token=REDACTED", // cut before the version
	} {
		if got := RequestLine(in); got != want {
			t.Errorf("RequestLine(%q) = %q, want %q", in, got, want)
		}
	}
}
