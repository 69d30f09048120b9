package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spliced-proxy/spliced/internal/testssl"
)

// cmdTLSAudit scans one TLS endpoint with testssl.sh (the scan of the
// TLS audit in make test: internal/testssl) and prints the findings of
// severity LOW or above, and the scanner's warnings, beyond those any
// self-signed test certificate gets. bench/tls-audit.sh runs it against
// spliced, HAProxy and nginx with their default TLS settings.
func cmdTLSAudit(args []string) error {
	fs := flag.NewFlagSet("tlsaudit", flag.ContinueOnError)
	target := fs.String("target", "", "host:port to scan")
	name := fs.String("name", "", "what is scanned, for the report")
	out := fs.String("json", "", "copy testssl.sh's JSON findings here (optional)")
	timeout := fs.Duration("timeout", 3*time.Minute, "bound on the scan")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *target == "" {
		return errors.New("need -target")
	}
	bin, err := testssl.Binary()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tlsaudit-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	start := time.Now()
	findings, console, err := testssl.Run(ctx, bin, dir, *target, testssl.Stall, *timeout)
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", *name, err, tail(console, 2000))
	}
	if *out != "" {
		b, err := os.ReadFile(filepath.Join(dir, "testssl.json"))
		if err != nil {
			return err
		}
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			return err
		}
	}
	bad := testssl.Unexpected(findings, testssl.Merge(testssl.Scanner, testssl.TestCertificate))
	fmt.Printf("%s: %d findings in %v; beyond a self-signed test certificate's: %d\n",
		*name, len(findings), time.Since(start).Round(time.Second), len(bad))
	fmt.Print(testssl.Report(bad))
	if m := testssl.Missing(findings); len(m) > 0 {
		fmt.Printf("  incomplete scan: no result for %v\n", m)
	}
	return nil
}
