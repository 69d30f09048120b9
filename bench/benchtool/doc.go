// Command benchtool is the measuring half of `make bench`; bench/run.sh is
// the orchestrating half (starting origin and proxies, writing their
// configurations). benchtool never starts or stops a proxy: it reads /proc,
// runs the load generator it is given, and writes one JSON line per run to a
// results file, from which `benchtool report` prints the tables.
//
// Subcommands:
//
//	ports N                  print N free loopback TCP ports
//	cpu PID                  CPU seconds (utime+stime) of PID and its descendants
//	rss PID                  resident KiB (VmRSS) of PID and its descendants
//	measure [flags] -- CMD   CPU of -pid before/after CMD (wrk), parse its result line
//	idle [flags]             RSS of -pid before/after N idle keep-alive connections
//	handshake [flags]        TLS connections, one handshake and one GET each (full or resumed)
//	flood [flags]            keep-alive TLS latency idle, then under a handshake flood
//	tlsaudit [flags]         testssl.sh scan of one endpoint (bench/tls-audit.sh)
//	fail [flags]             record a run that could not take place, with the reason
//	report [flags]           medians, ratios to HAProxy, tables, JSON document
//
// It is a bench tool: allocation and fmt are fine here.
package main
