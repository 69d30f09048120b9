package main

// A real ACME server for the tests of managed certificates: Let's
// Encrypt's pebble, a tool dependency of the module (go.mod's tool
// block), built once per test run, each test with its own instance,
// ports and TLS certificate.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

var pebbleBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// pebbleBinary builds the pebble of go.mod's tool block, once per run,
// into a temporary directory (`make test` needs nothing installed: the
// module proxy serves pebble like any dependency).
func pebbleBinary(t testing.TB) string {
	t.Helper()
	pebbleBuild.once.Do(func() {
		pebbleBuild.dir, pebbleBuild.err = os.MkdirTemp("", "spliced-e2e-pebble-")
		if pebbleBuild.err != nil {
			return
		}
		pebbleBuild.path = filepath.Join(pebbleBuild.dir, "pebble")
		out, err := exec.Command("go", "build", "-o", pebbleBuild.path, "github.com/letsencrypt/pebble/v2/cmd/pebble").CombinedOutput()
		if err != nil {
			pebbleBuild.err = fmt.Errorf("go build pebble: %v\n%s", err, out)
		}
	})
	if pebbleBuild.err != nil {
		t.Fatal(pebbleBuild.err)
	}
	return pebbleBuild.path
}

// pebbleOptions of one pebble instance.
type pebbleOptions struct {
	// HTTPPort and TLSPort are where its validation authority dials the
	// names of an order (http-01, tls-alpn-01): spliced's binds.
	HTTPPort, TLSPort int
	// Validity of the certificates it issues (0: 90 days).
	Validity time.Duration
	// Blocked names are refused at order time (rejectedIdentifier).
	Blocked []string
	// DNS is the resolver its validation authority asks (-dnsserver;
	// "": the system's, where localhost is 127.0.0.1).
	DNS string
}

// pebble is a running pebble.
type pebble struct {
	t         testing.TB
	Directory string // the ACME directory URL
	CAPEM     string // what its HTTPS is signed by (directory_ca_pem)
	mgmt      string // management API base URL (roots)
	cfgPath   string
	cmd       *exec.Cmd
	out       *testutil.SyncBuffer
	done      chan struct{}
	env       []string
	dns       string
}

// startPebble starts a pebble for t (stopped at its end).
func startPebble(t testing.TB, o pebbleOptions) *pebble {
	t.Helper()
	dir := t.TempDir()
	cert := testutil.SelfSigned(t, "localhost", "127.0.0.1")
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), []byte(cert.CertPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), []byte(cert.KeyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	validity := o.Validity
	if validity == 0 {
		validity = 90 * 24 * time.Hour
	}
	port, mport := testutil.FreePort(t), testutil.FreePort(t)
	blocked := o.Blocked
	if blocked == nil {
		blocked = []string{}
	}
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress":                  "127.0.0.1:" + strconv.Itoa(port),
		"managementListenAddress":        "127.0.0.1:" + strconv.Itoa(mport),
		"certificate":                    filepath.Join(dir, "cert.pem"),
		"privateKey":                     filepath.Join(dir, "key.pem"),
		"httpPort":                       o.HTTPPort,
		"tlsPort":                        o.TLSPort,
		"ocspResponderURL":               "",
		"externalAccountBindingRequired": false,
		"domainBlocklist":                blocked,
		"retryAfter":                     map[string]int{"authz": 1, "order": 1},
		"keyAlgorithm":                   "ecdsa",
		"profiles": map[string]any{"default": map[string]any{
			"description": "the tests' profile", "validityPeriod": int(validity / time.Second)}},
	}}
	b, _ := json.Marshal(cfg)
	p := &pebble{t: t, dns: o.DNS, Directory: "https://127.0.0.1:" + strconv.Itoa(port) + "/dir", CAPEM: cert.CertPEM,
		mgmt: "https://127.0.0.1:" + strconv.Itoa(mport), cfgPath: filepath.Join(dir, "pebble.json")}
	if err := os.WriteFile(p.cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// Real validations (not always valid), without pebble's random sleeps
	// before them, no nonce rejected on purpose (acmez retries them, but
	// a test should not depend on it), no authorization reused (each
	// order proves its names again: a renewal runs its challenge too).
	p.env = append(os.Environ(), "PEBBLE_VA_ALWAYS_VALID=0", "PEBBLE_VA_NOSLEEP=1",
		"PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0")
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *pebble) start() {
	t := p.t
	t.Helper()
	p.out = &testutil.SyncBuffer{}
	args := []string{"-config", p.cfgPath}
	if p.dns != "" {
		args = append(args, "-dnsserver", p.dns)
	}
	p.cmd = exec.Command(pebbleBinary(t), args...)
	p.cmd.Env = p.env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func() { p.cmd.Wait(); close(p.done) }()
	c := p.client()
	testutil.Eventually(t, 30*time.Second, func() bool {
		select {
		case <-p.done:
			t.Fatalf("pebble exited:\n%s", p.out.String())
		default:
		}
		resp, err := c.Get(p.Directory)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, "pebble answers its directory")
}

// stop ends pebble (the CA goes down); start brings it back, with new
// accounts and a new root (pebble keeps nothing).
func (p *pebble) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}

// client trusts pebble's HTTPS.
func (p *pebble) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(p.CAPEM))
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// root is the PEM of the root pebble issues under now.
func (p *pebble) root() string {
	p.t.Helper()
	resp, err := p.client().Get(p.mgmt + "/roots/0")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		p.t.Fatalf("pebble roots: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// testDNS answers A queries of every name with the address it holds now
// (Set), AAAA with nothing: where pebble's validation authority goes.
type testDNS struct {
	Addr string
	mu   sync.Mutex
	ip   string
}

func (d *testDNS) Set(ip string) { d.mu.Lock(); d.ip = ip; d.mu.Unlock() }

func startDNS(t testing.TB, ip string) *testDNS {
	t.Helper()
	// pebble asks over TCP; UDP on the same port for other clients.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	d := &testDNS{Addr: ln.Addr().String(), ip: ip}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		d.mu.Lock()
		ip := d.ip
		d.mu.Unlock()
		for _, q := range r.Question {
			if q.Qtype == dns.TypeA {
				if rr, err := dns.NewRR(q.Name + " 0 IN A " + ip); err == nil {
					m.Answer = append(m.Answer, rr)
				}
			}
		}
		_ = w.WriteMsg(m)
	})
	for _, srv := range []*dns.Server{{Listener: ln, Handler: h}, {PacketConn: pc, Handler: h}} {
		go func() { _ = srv.ActivateAndServe() }()
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return d
}
