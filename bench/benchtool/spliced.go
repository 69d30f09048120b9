package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// splicedProc is a spliced started by the seed001 and sched commands, in a
// state directory of its own, configured only through its REST API.
type splicedProc struct {
	cmd   *exec.Cmd
	admin string // host:port of the admin API
	log   bytes.Buffer
	hc    *http.Client
}

// freePort returns a loopback port free at the time of the call.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startSpliced starts bin with its state in dir, pinned to cpus with
// taskset when cpus is not empty, and waits for its admin API.
func startSpliced(ctx context.Context, bin, dir, cpus string) (*splicedProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o755); err != nil {
		return nil, err
	}
	p := &splicedProc{admin: "127.0.0.1:" + strconv.Itoa(port), hc: &http.Client{Timeout: 10 * time.Second}}
	args := []string{bin, "--admin-addr", p.admin, "--state-dir", filepath.Join(dir, "state")}
	if cpus != "" {
		args = append([]string{"taskset", "-c", cpus}, args...)
	}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := p.get("/api/v1/info"); err == nil {
			return p, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("admin API did not answer on %s: %s", p.admin, tail(p.log.String(), 300))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends TERM, waits up to 5 s, then kills.
func (p *splicedProc) stop() {
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

func (p *splicedProc) get(path string) ([]byte, error) {
	resp, err := p.hc.Get("http://" + p.admin + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b, nil
}

// api sends body (JSON) with method to path and wants a 2xx.
func (p *splicedProc) api(method, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(method, "http://"+p.admin+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s answered %d: %s", method, path, resp.StatusCode, tail(string(out), 300))
	}
	return nil
}

// loopAct is one loop's entry of /api/v1/activity (the fields used here).
type loopAct struct {
	Loop           int     `json:"loop"`
	TaskletsUrgent uint64  `json:"tasklets_urgent"`
	TaskletsNormal uint64  `json:"tasklets_normal"`
	TaskletsBulk   uint64  `json:"tasklets_bulk"`
	CPUUrgentNs    uint64  `json:"cpu_urgent_ns"`
	CPUNormalNs    uint64  `json:"cpu_normal_ns"`
	CPUBulkNs      uint64  `json:"cpu_bulk_ns"`
	CPUHandshakeNs uint64  `json:"cpu_handshake_ns"`
	ShareUrgent    float64 `json:"share_urgent"`
	AvgLoopUs      uint64  `json:"avg_loop_us"`
	Accepted       uint64  `json:"accepted"`
	Conns          int64   `json:"conns"`
}

// activity reads /api/v1/activity and how long the answer took.
func (p *splicedProc) activity() ([]loopAct, time.Duration, error) {
	t0 := time.Now()
	b, err := p.get("/api/v1/activity")
	d := time.Since(t0)
	if err != nil {
		return nil, d, err
	}
	var la []loopAct
	if err := json.Unmarshal(b, &la); err != nil {
		return nil, d, err
	}
	return la, d, nil
}

// waitIdle waits until no client connection is left on any loop (the
// previous run's), at most 10 s.
func (p *splicedProc) waitIdle() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		la, _, err := p.activity()
		if err != nil {
			return err
		}
		var n int64
		for _, a := range la {
			n += a.Conns
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d connections still open after 10 s", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// httpGetOK checks that url answers 200 with size bytes (plain HTTP/1.1,
// or TLS without verification), polling up to 10 s.
func httpGetOK(url string, size int) error {
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: benchTLSConfig(false)}}
	var last error
	for i := 0; i < 100; i++ {
		resp, err := c.Get(url)
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == 200 && len(b) == size {
				return nil
			}
			err = fmt.Errorf("status %d, %d bytes (want 200, %d)", resp.StatusCode, len(b), size)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("GET %s: %w", url, last)
}

// selfSigned makes an ECDSA P-256 certificate for 127.0.0.1 (PEM).
func selfSigned() (certPEM, keyPEM string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "bench.localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(30 * 24 * time.Hour),
		DNSNames:     []string{"bench.localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})), nil
}

// runLoad runs a load generator and returns its output; the context
// bounds it.
func runLoad(ctx context.Context, args []string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", args[0], err, tail(out.String(), 500))
	}
	return out.String(), nil
}
