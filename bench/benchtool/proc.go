package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// userHZ is the unit of utime and stime in /proc/PID/stat. Linux exports
// USER_HZ = 100 to user space on every architecture, whatever CONFIG_HZ is;
// run.sh checks `getconf CLK_TCK` agrees. 10 ms resolution: a 10 s run at
// full load is 1000 ticks, so the error is 0.1% at most.
const userHZ = 100

// statFields parses the fields of a /proc/PID/stat line that follow the
// command name. The name is in parentheses and may itself hold spaces and
// parentheses, so the split is at the last ')'.
func statFields(line string) ([]string, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 || i+2 > len(line) {
		return nil, fmt.Errorf("malformed stat line %q", line)
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state); we need up to field 15 (stime) = f[12].
	if len(f) < 13 {
		return nil, fmt.Errorf("stat line has %d fields after the name, want >= 13", len(f))
	}
	return f, nil
}

// statTimes returns ppid and utime+stime in ticks from a stat line.
// utime+stime of a process counts all its threads, live and exited.
func statTimes(line string) (ppid int, ticks int64, err error) {
	f, err := statFields(line)
	if err != nil {
		return 0, 0, err
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, fmt.Errorf("ppid: %w", err)
	}
	ut, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("utime: %w", err)
	}
	st, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stime: %w", err)
	}
	return ppid, ut + st, nil
}

// procTree returns pid and all its descendants (nginx: master and workers).
func procTree(proc string, pid int) ([]int, error) {
	if _, err := os.Stat(filepath.Join(proc, strconv.Itoa(pid))); err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		ppid, _, err := statTimes(string(b))
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out, nil
}

// treeCPUTicks sums utime+stime over pid and its descendants.
func treeCPUTicks(proc string, pid int) (int64, error) {
	pids, err := procTree(proc, pid)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, p := range pids {
		b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(p), "stat"))
		if err != nil {
			if p == pid {
				return 0, err
			}
			continue
		}
		_, t, err := statTimes(string(b))
		if err != nil {
			return 0, fmt.Errorf("process %d: %w", p, err)
		}
		sum += t
	}
	return sum, nil
}

// vmRSS parses VmRSS (KiB) from a /proc/PID/status document.
func vmRSS(status string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "VmRSS:") {
			continue
		}
		f := strings.Fields(line[len("VmRSS:"):])
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("malformed %q", line)
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, errors.New("no VmRSS line (kernel thread or zombie?)")
}

// treeRSS sums VmRSS over pid and its descendants, in KiB.
func treeRSS(proc string, pid int) (int64, error) {
	pids, err := procTree(proc, pid)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, p := range pids {
		b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(p), "status"))
		if err != nil {
			if p == pid {
				return 0, err
			}
			continue
		}
		kb, err := vmRSS(string(b))
		if err != nil {
			return 0, fmt.Errorf("process %d: %w", p, err)
		}
		sum += kb
	}
	return sum, nil
}

func pidArg(args []string) (int, error) {
	if len(args) != 1 {
		return 0, errors.New("want exactly one PID")
	}
	return strconv.Atoi(args[0])
}

func cmdCPU(args []string) error {
	pid, err := pidArg(args)
	if err != nil {
		return err
	}
	t, err := treeCPUTicks("/proc", pid)
	if err != nil {
		return err
	}
	fmt.Printf("%.2f\n", float64(t)/userHZ)
	return nil
}

func cmdRSS(args []string) error {
	pid, err := pidArg(args)
	if err != nil {
		return err
	}
	kb, err := treeRSS("/proc", pid)
	if err != nil {
		return err
	}
	fmt.Println(kb)
	return nil
}

// cmdPorts prints N distinct free loopback ports. They are free when
// printed; a port taken by someone else before use makes that proxy fail to
// start, which run.sh reports.
func cmdPorts(args []string) error {
	n := 1
	if len(args) == 1 {
		var err error
		if n, err = strconv.Atoi(args[0]); err != nil || n < 1 || n > 100 {
			return fmt.Errorf("bad count %q", args[0])
		}
	}
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		lns = append(lns, ln)
		fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	}
	return nil
}

// cpuBusyTicks returns the ticks CPU cpu spent not idle (user, nice,
// system, irq, softirq, steal; not idle or iowait) from a /proc/stat
// document. Subtracting the proxy's own ticks tells how much of the
// proxy's core other processes took during a run.
func cpuBusyTicks(stat string, cpu int) (int64, error) {
	prefix := "cpu" + strconv.Itoa(cpu) + " "
	for _, line := range strings.Split(stat, "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 8 {
			return 0, fmt.Errorf("malformed %q", line)
		}
		var busy int64
		for i, v := range f[:8] {
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%q: %w", line, err)
			}
			busy += n
		}
		return busy, nil
	}
	return 0, fmt.Errorf("no cpu%d line in /proc/stat", cpu)
}

func readCPUBusy(cpu int) (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return cpuBusyTicks(string(b), cpu)
}
