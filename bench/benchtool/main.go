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
	case "handshake":
		err = cmdHandshake(args)
	case "flood":
		err = cmdFlood(args)
	case "tlsfloor":
		err = cmdTLSFloor(args)
	case "tlsaudit":
		err = cmdTLSAudit(args)
	case "seed001":
		err = cmdSeed001(args)
	case "sched":
		err = cmdSched(args)
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
	fmt.Fprintln(os.Stderr, "usage: benchtool ports|cpu|rss|measure|idle|handshake|flood|seed001|sched|tlsaudit|tlsfloor|fail|report ...")
	os.Exit(2)
}
