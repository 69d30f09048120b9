// Package testssl runs testssl.sh (https://testssl.sh, Debian package
// testssl.sh, whose command is "testssl") against a TLS endpoint and reads
// the findings it writes with --jsonfile. The end-to-end audit of spliced's
// default TLS settings (cmd/spliced) and the manual audit of the bench
// proxies (bench/tls-audit.sh) use it; it is test tooling, never linked
// into the binary.
//
// A scan is bounded and offline: it runs the checks of a default scan
// except the HTTP header checks (-h: they grade the origin's response
// headers, HSTS and the like, which the TLS terminator does not add) and
// never contacts a CRL or OCSP server (no --phone-out) nor a DNS server
// (-n none).
package testssl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Finding is one entry of testssl.sh's flat JSON output.
type Finding struct {
	ID       string `json:"id"`
	IP       string `json:"ip"`
	Port     string `json:"port"`
	Severity string `json:"severity"`
	Finding  string `json:"finding"`
	CVE      string `json:"cve,omitempty"`
	CWE      string `json:"cwe,omitempty"`
}

func (f Finding) String() string {
	s := f.Severity + " " + f.ID + ": " + f.Finding
	if f.CVE != "" {
		s += " (" + f.CVE + ")"
	}
	return s
}

// Clean reports whether a severity says nothing is wrong: OK and INFO
// grade the server, DEBUG is the scanner's chatter. Everything else fails
// an audit unless expected: LOW, MEDIUM, HIGH, CRITICAL grade the server,
// WARN and FATAL say a check could not run (a scan that skipped a check is
// not a clean scan).
func Clean(severity string) bool {
	switch severity {
	case "OK", "INFO", "DEBUG":
		return true
	}
	return false
}

// Parse reads the flat JSON (--jsonfile) of one scan.
func Parse(b []byte) ([]Finding, error) {
	var fs []Finding
	if err := json.Unmarshal(b, &fs); err != nil {
		return nil, fmt.Errorf("testssl.sh JSON: %w", err)
	}
	for i, f := range fs {
		if f.ID == "" || f.Severity == "" {
			return nil, fmt.Errorf("testssl.sh JSON: entry %d has no id or severity: %+v", i, f)
		}
	}
	return fs, nil
}

// Unexpected returns the findings that are not Clean and whose id is not a
// key of expected (id → why that finding is expected here), in scan order.
func Unexpected(fs []Finding, expected map[string]string) []Finding {
	var out []Finding
	for _, f := range fs {
		if _, ok := expected[f.ID]; ok || Clean(f.Severity) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// Covered are the ids a complete scan reports whatever the server: every
// protocol, the cipher categories, and each vulnerability check. Missing
// returns those absent from a scan, which means testssl.sh skipped or
// aborted a check (a timeout, an incompatible option) rather than passed it.
var Covered = []string{
	"SSLv2", "SSLv3", "TLS1", "TLS1_1", "TLS1_2", "TLS1_3",
	"cipherlist_NULL", "cipherlist_aNULL", "cipherlist_EXPORT", "cipherlist_LOW",
	"cipherlist_3DES_IDEA", "cipherlist_AVERAGE", "cipherlist_STRONG",
	"cipher_order", "TLS_session_ticket", "cert_chain_of_trust",
	"heartbleed", "CCS", "ticketbleed", "ROBOT", "secure_renego", "secure_client_renego",
	"CRIME_TLS", "BREACH", "POODLE_SSL", "fallback_SCSV", "SWEET32", "FREAK",
	"DROWN", "LOGJAM", "BEAST", "LUCKY13", "RC4",
}

// Missing returns the ids of Covered that fs lacks.
func Missing(fs []Finding) []string {
	var out []string
	for _, id := range Covered {
		if !slices.ContainsFunc(fs, func(f Finding) bool { return f.ID == id }) {
			out = append(out, id)
		}
	}
	return out
}

// Binary is the path of testssl.sh: "testssl" (Debian's name) or
// "testssl.sh" (upstream's), whichever is in PATH.
func Binary() (string, error) {
	for _, name := range []string{"testssl", "testssl.sh"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("testssl.sh not found in PATH (Debian package testssl.sh; make test-deps installs it)")
}

// Args are the options of one scan of target (host:port) writing its
// findings to jsonPath.
//
//   - -p -s -f -P -S -U -c: protocols, cipher categories, forward
//     secrecy, server preference, server defaults (certificate, tickets),
//     every vulnerability, client simulation; a default scan less -h.
//   - -n none: no DNS (the target is an address; CAA lookups would need
//     the network). Without --phone-out no CRL or OCSP server is fetched.
//   - --connect-timeout, --openssl-timeout: a check that hangs is cut
//     after 10 s instead of stalling the run (it then reports WARN).
//   - --warnings off: never waits for a keypress; --color 0, --quiet:
//     plain output, no banner.
func Args(jsonPath, target string) []string {
	return []string{
		"--quiet", "--warnings", "off", "--color", "0",
		"--connect-timeout", "10", "--openssl-timeout", "10",
		"-n", "none", "--jsonfile", jsonPath,
		"-p", "-s", "-f", "-P", "-S", "-U", "-c",
		target,
	}
}

// Stall is how long a scan may print nothing before Run ends it as
// stuck. testssl.sh prints each result as it has it, and cuts a check
// whose peer does not answer after 10 s (Args): the longest silence of a
// one-minute scan here was 6 s. A bound on the whole scan instead failed
// scans that were only slow: 40-60 s on an idle machine, 2m15s under the
// load of other jobs, past 3 min at a load of 47.
const Stall = 2 * time.Minute

// Run scans target with bin. dir holds the JSON file (the caller's
// temporary directory). The scan ends as failed when it printed nothing
// for stall (Stall), or ran limit in all. It returns the findings and the
// scanner's console output, for the failure message.
func Run(ctx context.Context, bin, dir, target string, stall, limit time.Duration) ([]Finding, string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	jsonPath := filepath.Join(dir, "testssl.json")
	_ = os.Remove(jsonPath) // testssl.sh refuses to overwrite one
	out := &watchedBuffer{last: time.Now()}
	cmd := exec.CommandContext(ctx, bin, Args(jsonPath, target)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = dir
	// testssl.sh forks openssl per check: kill the whole group on timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stalled atomic.Bool
	watch := make(chan struct{})
	defer close(watch)
	go func() {
		tick := time.NewTicker(stall / 20)
		defer tick.Stop()
		for {
			select {
			case <-watch:
				return
			case <-tick.C:
			}
			if out.silence() > stall {
				stalled.Store(true)
				cancel()
				return
			}
		}
	}()
	err := cmd.Run()
	switch {
	case stalled.Load():
		return nil, out.String(), fmt.Errorf("testssl.sh printed nothing for %v: stuck", stall)
	case ctx.Err() != nil:
		return nil, out.String(), fmt.Errorf("testssl.sh did not finish within %v", limit)
	case err != nil:
		return nil, out.String(), fmt.Errorf("testssl.sh: %w", err)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return nil, out.String(), err
	}
	fs, err := Parse(b)
	return fs, out.String(), err
}

// watchedBuffer is the scan's output, and when it last grew.
type watchedBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	last time.Time
}

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = time.Now()
	return w.b.Write(p)
}

func (w *watchedBuffer) silence() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Since(w.last)
}

func (w *watchedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Report formats findings one per line, for a failure message.
func Report(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + f.String() + "\n")
	}
	return b.String()
}

// Scanner are the findings about the machine the scanner runs on, not the
// server: Debian's openssl has no GOST engine, which testssl.sh reports
// on every scan.
var Scanner = map[string]string{
	"engine_problem": "the scanner's openssl has no GOST engine (about the scanner's machine, not the server)",
}

// TestCertificate are the findings every self-signed test certificate
// gets, whatever the server: a test cannot have a certificate issued by a
// public CA. Everything else about the certificate (key size, signature
// algorithm, serial number entropy, validity period, names matching the
// target) a test can get right, so it is not listed here. The certificate
// should be valid for 90 days (testssl.sh grades a shorter remaining
// validity MEDIUM or HIGH, a longer period than 398 days too), name the
// address scanned and have a random serial number of at least 64 bits.
var TestCertificate = map[string]string{
	"cert_chain_of_trust": "self-signed: no CA the scanner trusts issued it",
	"cert_revocation":     "no CRL or OCSP URI: a test certificate has no CA to run them",
}

// Merge returns the union of expectation maps (a later map wins a tie).
func Merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
