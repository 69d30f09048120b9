package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// cmdSeed001 reproduces seed 001's measurement: h2load with a few
// long-lived HTTP/2 connections, each sending many requests, through
// spliced with L loops, for each accept distribution; how long h2load takes
// to complete and how the connections were spread over the loops
// (Accepted of /api/v1/activity, per loop, over the run). Medians of
// -repeat runs, interleaved (every distribution for one client count, then
// the next count, then the next repetition).
func cmdSeed001(args []string) error {
	fs := flag.NewFlagSet("seed001", flag.ContinueOnError)
	bin := fs.String("bin", "bin/spliced", "spliced binary")
	origin := fs.String("origin", "", "origin host:port (serves /64)")
	loopsF := fs.String("loops", "2,4", "loop counts (nbthread), comma-separated")
	distsF := fs.String("dists", "p2c-rr,p2c,round-robin,least-conn", "accept distributions")
	clientsF := fs.String("clients", "6,10,14", "h2load client counts")
	reqs := fs.Int("reqs", 5000, "requests per client")
	streams := fs.Int("streams", 10, "h2load streams in flight per client")
	repeat := fs.Int("repeat", 3, "runs per cell (medians)")
	cpus := fs.String("cpus", "", "taskset CPU list for spliced (empty: not pinned)")
	loadCPUs := fs.String("load-cpus", "", "taskset CPU list for h2load (empty: not pinned)")
	tmp := fs.String("dir", "", "directory for spliced's state (default: a temporary one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	loops, err1 := intList(*loopsF)
	clients, err2 := intList(*clientsF)
	if err := errors.Join(err1, err2); err != nil || *origin == "" || *reqs < 1 || *repeat < 1 {
		return fmt.Errorf("need -origin, -reqs >= 1, -repeat >= 1, integer lists: %v", err)
	}
	dists := strings.Split(*distsF, ",")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	dir := *tmp
	if dir == "" {
		d, err := os.MkdirTemp("", "seed001-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var res []seedRun
	for _, l := range loops {
		rs, err := seed001Loops(ctx, *bin, filepath.Join(dir, "loops"+strconv.Itoa(l)), *origin, *cpus, *loadCPUs,
			l, dists, clients, *reqs, *streams, *repeat)
		if err != nil {
			fmt.Fprintf(os.Stderr, "seed001: %d loops: %v\n", l, err)
		}
		res = append(res, rs...)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	printSeed001(os.Stdout, res, loops, clients, dists, *reqs, *streams, *repeat)
	return nil
}

// seedRun is one h2load run of the seed001 rows.
type seedRun struct {
	Loops, Clients int
	Dist           string
	Seconds        float64 // h2load's completion time
	ReqPerSec      float64
	Spread         []int // client connections per loop, in loop order
	Err            string
}

func seed001Loops(ctx context.Context, bin, dir, origin, cpus, loadCPUs string, loops int, dists []string,
	clients []int, reqs, streams, repeat int) ([]seedRun, error) {
	p, err := startSpliced(ctx, bin, dir, cpus)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	host, port, _ := strings.Cut(origin, ":")
	oport, _ := strconv.Atoi(port)
	fport, err := freePort()
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		m, path string
		body    any
	}{
		{"PATCH", "/api/v1/tuning", map[string]any{"nbthread": loops}},
		{"POST", "/api/v1/backends", map[string]any{"name": "origin", "mode": "http", "balance": "roundrobin",
			"servers": []any{map[string]any{"name": "o1", "address": host, "port": oport}}}},
		{"POST", "/api/v1/frontends", map[string]any{"name": "bench", "mode": "http", "default_backend": "origin",
			"binds": []any{map[string]any{"name": "b1", "address": "127.0.0.1", "port": fport}}}},
	} {
		if err := p.api(c.m, c.path, c.body); err != nil {
			return nil, err
		}
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/64", fport)
	if err := httpGetOK(url, 64); err != nil {
		return nil, err
	}
	var out []seedRun
	for rep := 1; rep <= repeat; rep++ {
		for _, n := range clients {
			for _, d := range dists {
				if ctx.Err() != nil {
					return out, ctx.Err()
				}
				r := seedRun{Loops: loops, Clients: n, Dist: d}
				if err := seed001Once(ctx, p, &r, url, loadCPUs, n*reqs, streams); err != nil {
					r.Err = err.Error()
					fmt.Fprintf(os.Stderr, "    seed001 %d loops, %d clients, %s #%d: n/a: %s\n", loops, n, d, rep, r.Err)
				} else {
					fmt.Fprintf(os.Stderr, "    seed001 %d loops, %d clients, %s #%d: %.0f ms, %.0f req/s, per loop %s\n",
						loops, n, d, rep, r.Seconds*1e3, r.ReqPerSec, spreadString(r.Spread))
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func seed001Once(ctx context.Context, p *splicedProc, r *seedRun, url, loadCPUs string, total, streams int) error {
	if err := p.api("PATCH", "/api/v1/tuning", map[string]any{"distribution": r.Dist}); err != nil {
		return err
	}
	if err := p.waitIdle(); err != nil {
		return err
	}
	before, _, err := p.activity()
	if err != nil {
		return err
	}
	args := []string{"h2load", "-t1", "-c", strconv.Itoa(r.Clients), "-m", strconv.Itoa(streams),
		"-n", strconv.Itoa(total), url}
	if loadCPUs != "" {
		args = append([]string{"taskset", "-c", loadCPUs}, args...)
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := runLoad(lctx, args)
	if err != nil {
		return err
	}
	after, _, err := p.activity()
	if err != nil {
		return err
	}
	var run Run
	if err := parseH2loadResult(out, &run); err != nil {
		return err
	}
	if e := run.Errors; run.Requests != int64(total) || e.Connect+e.Read+e.Status+e.Timeout > 0 {
		return fmt.Errorf("%d of %d requests succeeded (errors %+v)", run.Requests, total, e)
	}
	r.Seconds = run.Seconds
	r.ReqPerSec = float64(run.Requests) / run.Seconds
	r.Spread = make([]int, len(after))
	for i := range after {
		if i < len(before) {
			r.Spread[i] = int(after[i].Accepted - before[i].Accepted)
		}
	}
	return nil
}

func spreadString(s []int) string {
	parts := make([]string, len(s))
	for i, n := range s {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, "/")
}

// imbalance is the most loaded loop's connections over the fair share
// (clients / loops): 1.00 is a perfect spread; h2load's completion is
// bounded by the most loaded loop.
func imbalance(s []int, clients int) float64 {
	if len(s) == 0 || clients == 0 {
		return 0
	}
	return float64(slices.Max(s)) * float64(len(s)) / float64(clients)
}

func printSeed001(w io.Writer, res []seedRun, loops, clients []int, dists []string, reqs, streams, repeat int) {
	fmt.Fprintf(w, "\n== seed001: h2load, N clients x %d requests each (%d streams in flight per client), h2c through spliced; medians of %d\n",
		reqs, streams, repeat)
	fmt.Fprintln(w, "   completion = h2load's time to finish all requests; per loop = client connections each loop got, every run; max/fair = most loaded loop / (clients / loops), median")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "loops\tclients\tdistribution\tcompletion ms\treq/s\ttime ×p2c\treq/s ×p2c\tmax/fair\tper loop (each run)\t")
	for _, l := range loops {
		for _, n := range clients {
			med := map[string][3]float64{}
			for _, d := range dists {
				var t, q, im []float64
				for _, r := range res {
					if r.Loops == l && r.Clients == n && r.Dist == d && r.Err == "" {
						t = append(t, r.Seconds*1e3)
						q = append(q, r.ReqPerSec)
						im = append(im, imbalance(r.Spread, n))
					}
				}
				if len(t) == 0 {
					fmt.Fprintf(tw, "%d\t%d\t%s\tn/a\t\t\t\t\t\t\n", l, n, d)
					continue
				}
				med[d] = [3]float64{median(t), median(q), median(im)}
			}
			ref, hasRef := med["p2c"]
			for _, d := range dists {
				m, ok := med[d]
				if !ok {
					continue
				}
				rt, rq := "-", "-"
				if hasRef && ref[0] > 0 {
					rt = fmt.Sprintf("%.2f×", m[0]/ref[0])
					rq = fmt.Sprintf("%.2f×", m[1]/ref[1])
				}
				var sp []string
				for _, r := range res {
					if r.Loops == l && r.Clients == n && r.Dist == d {
						if r.Err != "" {
							sp = append(sp, "n/a")
						} else {
							sp = append(sp, spreadString(r.Spread))
						}
					}
				}
				fmt.Fprintf(tw, "%d\t%d\t%s\t%.0f\t%.0f\t%s\t%s\t%.2f\t%s\t\n", l, n, d, m[0], m[1], rt, rq, m[2], strings.Join(sp, " "))
			}
		}
	}
	tw.Flush()
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
