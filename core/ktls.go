package core

import (
	"os"
	"strings"
)

// TCPULPPath is where Linux lists the TCP upper-layer protocols (ULPs) it
// can attach to a socket; kTLS needs "tls" there (CONFIG_TLS, module tls).
const TCPULPPath = "/proc/sys/net/ipv4/tcp_available_ulp"

// KTLSSupport reports whether the kernel could run kTLS, for /api/v1/info:
// "available" when the file at path (TCPULPPath outside tests) lists "tls",
// "unavailable: no tls ULP" when it does not, "unknown: <reason>" when it
// cannot be read. It reads the file on every call (loading the tls module
// adds the ULP at run time) and keeps no state.
//
// It lives here, next to Control but outside it, because it is knowledge of
// the host kernel, not of what the data plane runs: the API calls it
// directly, no Control implementation (engine, coretest fakes) has to carry
// it, and a future kTLS transport in core/proxy can ask the same function.
// spliced has no kTLS transport yet: "available" says only that one could
// be added on this host.
func KTLSSupport(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown: " + err.Error()
	}
	for _, ulp := range strings.Fields(string(b)) {
		if ulp == "tls" {
			return "available"
		}
	}
	return "unavailable: no tls ULP"
}
