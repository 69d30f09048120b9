package main

// End-to-end tests of placement (issue 6) on the real machine: the cpu-map
// round trip read back from the kernel per thread, an IRQ pin written to
// the real /proc as root, and nbthread changed under continuous traffic.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// cpusAllowedOf reads Cpus_allowed_list of thread tid of process pid.
func cpusAllowedOf(t *testing.T, pid, tid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list for %d/%d", pid, tid)
	return ""
}

type cpuMapAnswer struct {
	Mode    string `json:"mode"`
	Allowed []int  `json:"allowed"`
	Loops   []struct {
		Thread     int    `json:"thread"`
		TID        int    `json:"tid"`
		State      string `json:"state"`
		Configured []int  `json:"configured"`
		Granted    []int  `json:"granted"`
	} `json:"loops"`
}

func TestPinCPUMapRoundTripReadBackPerThread(t *testing.T) {
	in := startSpliced(t, "")
	in.MustDo(200, "PATCH", "/api/v1/tuning", `{"nbthread":2}`)
	var m cpuMapAnswer
	in.MustDo(200, "GET", "/api/v1/cpu-map", nil).JSON(t, &m)
	if len(m.Allowed) < 2 {
		t.Skipf("needs 2 CPUs in the affinity mask, have %v", m.Allowed)
	}
	all := fmt.Sprintf("%d-%d", m.Allowed[0], m.Allowed[len(m.Allowed)-1])
	if len(m.Allowed) != m.Allowed[len(m.Allowed)-1]-m.Allowed[0]+1 {
		t.Skipf("non-contiguous mask %v", m.Allowed)
	}
	check := func(step string, want ...string) {
		t.Helper()
		var m cpuMapAnswer
		in.MustDo(200, "GET", "/api/v1/cpu-map", nil).JSON(t, &m)
		if len(m.Loops) != len(want) {
			t.Fatalf("%s: %d loops, want %d", step, len(m.Loops), len(want))
		}
		for i, l := range m.Loops {
			kernel := cpusAllowedOf(t, in.Pid(), l.TID)
			if kernel != want[i] {
				t.Errorf("%s: thread %d (tid %d): kernel says %q, want %q", step, i, l.TID, kernel, want[i])
			}
			t.Logf("%s: thread %d tid %d configured %v granted %v kernel %s", step, i, l.TID, l.Configured, l.Granted, kernel)
		}
	}
	in.MustDo(200, "PUT", "/api/v1/cpu-map", `{"mode":"manual","threads":[{"thread":0,"cpus":[0]},{"thread":1,"cpus":[1]}]}`)
	check("manual", "0", "1")
	in.MustDo(200, "PUT", "/api/v1/cpu-map", `{"mode":"auto"}`)
	check("auto", strconv.Itoa(m.Allowed[0]), strconv.Itoa(m.Allowed[1]))
	in.MustDo(200, "PUT", "/api/v1/cpu-map", `{"mode":"none"}`)
	check("none", all, all)
	// The map is part of the config: persisted, in the revisions.
	var cfg struct {
		CPUMap struct {
			Mode string `json:"mode"`
		} `json:"cpu_map"`
	}
	in.MustDo(200, "GET", "/api/v1/config", nil).JSON(t, &cfg)
	if cfg.CPUMap.Mode != "none" {
		t.Fatalf("config cpu_map mode %q", cfg.CPUMap.Mode)
	}
}

type irqAnswer struct {
	IRQ      int    `json:"irq"`
	Name     string `json:"name"`
	Chip     string `json:"chip"`
	Affinity []int  `json:"affinity"`
}

// TestPinIRQPutAsRoot sets a harmless IRQ (a serial port or ACPI line,
// never a NIC or disk queue) to one CPU through the API and checks
// /proc/irq; then a virtio-blk request queue, which the kernel manages:
// 409 and the config unchanged. Original affinities are restored.
func TestPinIRQPutAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to write /proc/irq")
	}
	in := startSpliced(t, "")
	var irqs []irqAnswer
	in.MustDo(200, "GET", "/api/v1/irqs", nil).JSON(t, &irqs)
	if len(irqs) == 0 {
		t.Skip("no IRQ in /proc/interrupts")
	}
	restore := func(q irqAnswer) {
		t.Cleanup(func() {
			if len(q.Affinity) == 0 {
				return
			}
			var parts []string
			for _, c := range q.Affinity {
				parts = append(parts, strconv.Itoa(c))
			}
			os.WriteFile(fmt.Sprintf("/proc/irq/%d/smp_affinity_list", q.IRQ), []byte(strings.Join(parts, ",")), 0)
		})
	}
	tried := 0
	for _, q := range irqs {
		harmless := strings.Contains(q.Name, "ttyS") || strings.Contains(q.Name, "ACPI") || strings.Contains(q.Name, "i8042")
		if !harmless || len(q.Affinity) == 0 {
			continue
		}
		tried++
		restore(q)
		gen := in.MustDo(200, "GET", "/api/v1/info", nil).Header.Get("X-Spliced-Generation")
		target := q.Affinity[len(q.Affinity)-1]
		r := in.Do("PUT", fmt.Sprintf("/api/v1/irqs/%d", q.IRQ), fmt.Sprintf(`{"cpus":[%d]}`, target))
		switch r.Status {
		case 200:
			b, err := os.ReadFile(fmt.Sprintf("/proc/irq/%d/smp_affinity_list", q.IRQ))
			if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(target) {
				t.Fatalf("irq %d: /proc says %q after PUT %d (%v)", q.IRQ, b, target, err)
			}
			var cfg struct {
				IRQ struct {
					Pins []struct {
						IRQ  int   `json:"irq"`
						CPUs []int `json:"cpus"`
					} `json:"pins"`
				} `json:"irq"`
			}
			in.MustDo(200, "GET", "/api/v1/config", nil).JSON(t, &cfg)
			if len(cfg.IRQ.Pins) != 1 || cfg.IRQ.Pins[0].IRQ != q.IRQ {
				t.Fatalf("config pins %+v", cfg.IRQ.Pins)
			}
			t.Logf("irq %d (%s) pinned to CPU %d", q.IRQ, q.Name, target)
		case 409:
			t.Logf("irq %d (%s): 409 %s", q.IRQ, q.Name, r.Body)
			if now := in.MustDo(200, "GET", "/api/v1/info", nil).Header.Get("X-Spliced-Generation"); now != gen {
				t.Fatalf("generation %s -> %s after a 409", gen, now)
			}
		default:
			t.Fatalf("PUT irq %d: %d %s", q.IRQ, r.Status, r.Body)
		}
		break
	}
	// A virtio-blk request queue is kernel-managed: 409, nothing changed.
	for _, q := range irqs {
		if !strings.Contains(q.Name, "-req.") || len(q.Affinity) == 0 {
			continue
		}
		tried++
		restore(q)
		before := in.MustDo(200, "GET", "/api/v1/config", nil).Body
		other := 0
		if len(q.Affinity) == 1 && q.Affinity[0] == 0 {
			other = 1
		}
		r := in.Do("PUT", fmt.Sprintf("/api/v1/irqs/%d", q.IRQ), fmt.Sprintf(`{"cpus":[%d]}`, other))
		if r.Status == 200 {
			t.Logf("irq %d (%s) accepted the pin: not managed on this kernel", q.IRQ, q.Name)
			break
		}
		if r.Status != 409 || !strings.Contains(string(r.Body), "apply-failed") {
			t.Fatalf("PUT managed irq %d: %d %s", q.IRQ, r.Status, r.Body)
		}
		if after := in.MustDo(200, "GET", "/api/v1/config", nil).Body; string(after) != string(before) {
			t.Fatalf("config changed by a refused IRQ pin:\n%s\n%s", before, after)
		}
		t.Logf("irq %d (%s): 409 %s", q.IRQ, q.Name, r.Body)
		break
	}
	if tried == 0 {
		t.Skip("no serial/ACPI or virtio-blk IRQ on this machine")
	}
}

// TestPinNbthreadUnderTrafficNoFailure changes nbthread 2 -> 4 -> 1 -> 2
// while a client opens short connections through a tcp frontend without
// pause (bounded in count and time) and long connections stay open across
// every change: no connection may fail or be dropped.
func TestPinNbthreadUnderTrafficNoFailure(t *testing.T) {
	in := startSpliced(t, "")
	o := newTCPOrigin(t, "a")
	port := setupTCP(t, in, o.server("s1"))
	in.MustDo(200, "PATCH", "/api/v1/tuning", `{"nbthread":2,"distribution":"round-robin"}`)

	var ok atomic.Int64
	var mu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	done := make(chan struct{})
	deadline := time.Now().Add(60 * time.Second)
	go func() {
		defer close(done)
		buf := make([]byte, 16)
		for i := 0; i < 200000 && time.Now().Before(deadline); i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := func() error {
				c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
				if err != nil {
					return err
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.ReadFull(c, buf[:1]); err != nil || buf[0] != 'a' {
					return fmt.Errorf("greeting %q: %v", buf[:1], err)
				}
				msg := []byte("req" + strconv.Itoa(i%100))
				if _, err := c.Write(msg); err != nil {
					return err
				}
				if _, err := io.ReadFull(c, buf[:len(msg)]); err != nil {
					return err
				}
				if string(buf[:len(msg)]) != string(msg) {
					return errors.New("echo mismatch")
				}
				return nil
			}()
			if err != nil {
				mu.Lock()
				failures = append(failures, err.Error())
				mu.Unlock()
				continue
			}
			ok.Add(1)
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()
	progress := func(step string, n int64) {
		t.Helper()
		from := ok.Load()
		testutil.Eventually(t, 20*time.Second, func() bool { return ok.Load() >= from+n }, step+": traffic flows")
	}
	var longs []net.Conn
	for range 4 {
		c, _ := greet(t, port)
		longs = append(longs, c)
	}
	progress("nbthread 2", 100)
	for _, n := range []int{4, 1, 2} {
		step := "nbthread " + strconv.Itoa(n)
		in.MustDo(200, "PATCH", "/api/v1/tuning", fmt.Sprintf(`{"nbthread":%d}`, n))
		var info struct {
			Nbthread int `json:"nbthread"`
		}
		in.MustDo(200, "GET", "/api/v1/info", nil).JSON(t, &info)
		if info.Nbthread != n {
			t.Fatalf("%s: info says %d", step, info.Nbthread)
		}
		progress(step, 500)
		for i, c := range longs {
			echoes(t, c, fmt.Sprintf("%s-long%d", step, i))
		}
		var m cpuMapAnswer
		in.MustDo(200, "GET", "/api/v1/cpu-map", nil).JSON(t, &m)
		active := 0
		for _, l := range m.Loops {
			if l.State == "active" {
				active++
			}
		}
		if active != n {
			t.Fatalf("%s: %d active loop threads: %+v", step, active, m.Loops)
		}
	}
	close(stop)
	<-done
	for _, c := range longs {
		c.Close()
	}
	// Loops removed by 4 -> 1 and not taken back stop once their long
	// connections are gone.
	testutil.Eventually(t, 10*time.Second, func() bool {
		var m cpuMapAnswer
		in.MustDo(200, "GET", "/api/v1/cpu-map", nil).JSON(t, &m)
		return len(m.Loops) == 2
	}, "only 2 loop threads left")
	if strings.Contains(in.Logs(), "DATA RACE") {
		t.Fatalf("the race detector reported a race:\n%s", in.Logs())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("%d of %d connections failed; first: %s", len(failures), ok.Load()+int64(len(failures)), failures[0])
	}
	t.Logf("%d connections through nbthread 2->4->1->2, none failed; 4 long connections kept", ok.Load())
}
