package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// storeURLExample is what a good --store URL looks like, for the errors.
const storeURLExample = "etcd://127.0.0.1:2379/spliced (or etcd://host1:2379,host2:2379,host3:2379/spliced)"

// ParseStoreURL reads a --store URL, etcd://host:port[,host:port…]/prefix,
// into the etcd client endpoints ("host:port") and the key prefix ("/"
// then the path, without a trailing slash: "/spliced"). Every host needs
// its port (etcd's client port is usually 2379); the prefix keeps the
// nodes of one cluster together and apart from anything else the etcd
// cluster holds, so it may not be empty or "/", nor end in "/nodes" (the
// node keys of a cluster one level up). Credentials, queries and
// fragments are refused: TLS client certificates come from --etcd-cert
// and --etcd-key.
func ParseStoreURL(s string) (endpoints []string, prefix string, err error) {
	bad := func(format string, a ...any) ([]string, string, error) {
		return nil, "", fmt.Errorf("--store %q: %s; want %s", s, fmt.Sprintf(format, a...), storeURLExample)
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return bad("not a URL")
	}
	if scheme != "etcd" {
		return bad("scheme %q is not supported (etcd is the only cluster store)", scheme)
	}
	if strings.ContainsAny(rest, "?#") {
		return bad("a query or fragment is not supported")
	}
	hosts, path, _ := strings.Cut(rest, "/")
	if strings.Contains(hosts, "@") {
		return bad("credentials in the URL are not supported (use --etcd-cert and --etcd-key)")
	}
	if hosts == "" {
		return bad("no host")
	}
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			return bad("an empty host in the list")
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			return bad("host %q needs a port, as in %s:2379", h, h)
		}
		if host == "" {
			return bad("no host before :%s", port)
		}
		if strings.ContainsAny(host, " \t/\\") {
			return bad("bad host %q", host)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return bad("bad port %q of host %q (1 to 65535)", port, host)
		}
		endpoints = append(endpoints, net.JoinHostPort(host, port))
	}
	path = strings.TrimRight(path, "/")
	if path == "" {
		return bad("no key prefix (the path after the hosts)")
	}
	for _, seg := range strings.Split(path, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return bad("key prefix %q has an empty, \".\" or \"..\" segment", "/"+path)
		}
	}
	for _, r := range path {
		if r <= ' ' || r == 0x7f {
			return bad("key prefix %q holds a space or a control character", "/"+path)
		}
	}
	if i := strings.LastIndexByte(path, '/'); i >= 0 && "/"+path[i+1:]+"/" == keyNodes {
		// P/nodes/<name> are the node keys of a cluster on P: this
		// cluster's P/current and P/tokens would be those of nodes
		// named "current" and "tokens" there, and its keys listed as
		// nodes of that cluster.
		return bad("key prefix %q ends in /nodes, where the cluster on %q keeps its node keys", "/"+path, "/"+path[:i])
	}
	return endpoints, "/" + path, nil
}

// ClientTLS builds the TLS configuration of the etcd client from the
// --etcd-cacert, --etcd-cert and --etcd-key files (PEM): nil when all three
// are empty (plain connections). caFile alone verifies the servers with
// that CA instead of the system's; certFile and keyFile (both or neither)
// are the client certificate etcd's --client-cert-auth checks.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--etcd-cert and --etcd-key go together: give both or neither")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-cacert %s: no PEM certificate in it", caFile)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
