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
//	fail [flags]             record a run that could not take place, with the reason
//	report [flags]           medians, ratios to HAProxy, tables, JSON document
//
// It is a bench tool: allocation and fmt are fine here.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	args := os.Args[2:]
	switch os.Args[1] {
	case "ports":
		err = cmdPorts(args)
	case "cpu":
		err = cmdCPU(args)
	case "rss":
		err = cmdRSS(args)
	case "measure":
		err = cmdMeasure(args)
	case "idle":
		err = cmdIdle(args)
	case "fail":
		err = cmdFail(args)
	case "report":
		err = cmdReport(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchtool %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: benchtool ports|cpu|rss|measure|idle|fail|report ...")
	os.Exit(2)
}
