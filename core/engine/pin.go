package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/pin"
)

// AffinityMask is the process affinity mask (what cpu_map auto
// distributes), read from the engine's FS (any goroutine).
func (e *Engine) AffinityMask() ([]int, error) { return e.th.fs.AffinityMask() }

// IRQs lists the IRQs of the engine's FS (any goroutine).
func (e *Engine) IRQs() ([]pin.IRQ, error) { return e.th.fs.IRQs() }

// IRQ reads IRQ n from the engine's FS (any goroutine).
func (e *Engine) IRQ(n int) (pin.IRQ, error) { return e.th.fs.IRQ(n) }

// Threads reports every live loop thread (any goroutine; waits for an
// Apply in progress).
func (e *Engine) Threads() []core.ThreadState {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]core.ThreadState, 0, len(e.th.all))
	for i, rt := range e.th.all {
		if rt.state == loopStopped {
			continue
		}
		ts := core.ThreadState{Thread: i, TID: int(rt.tid.Load()), State: "active", Configured: slices.Clone(rt.cpus)}
		if rt.state == loopDraining {
			ts.State = "draining"
		}
		if g, err := pin.ThreadAffinityOf(ts.TID); err != nil {
			ts.Error = err.Error()
		} else {
			ts.Granted = g
		}
		out = append(out, ts)
	}
	return out
}

// PinWarnings reports the pins that could not be applied (any goroutine).
func (e *Engine) PinWarnings() []string {
	if p := e.th.warnings.Load(); p != nil {
		return slices.Clone(*p)
	}
	return []string{}
}

// CPUMapMasks is the CPU list of each of n loops under m: manual gives the
// listed threads their CPUs, auto gives loop i the i-th CPU of allowed (the
// process mask; round robin when there are more loops than CPUs), none and
// unlisted threads get nil (not pinned). field[i] is the JSON pointer of
// what decided loop i's list.
func CPUMapMasks(m config.CPUMap, n int, allowed []int) (masks [][]int, field []string) {
	masks, field = make([][]int, n), make([]string, n)
	switch m.Mode {
	case config.CPUMapAuto:
		if len(allowed) == 0 {
			return
		}
		for i := range n {
			masks[i], field[i] = []int{allowed[i%len(allowed)]}, "/cpu_map/mode"
		}
	case config.CPUMapManual:
		for k, t := range m.Threads {
			if t.Thread >= 0 && t.Thread < n {
				masks[t.Thread] = slices.Clone(t.CPUs)
				field[t.Thread] = "/cpu_map/threads/" + strconv.Itoa(k) + "/cpus"
			}
		}
	}
	return
}

// pinUndo restores what applyPins changed.
type pinUndo struct {
	threads []threadUndo
}

type threadUndo struct {
	rt   *loopRT
	prev []int // rt.cpus before
}

// applyPins makes the loop threads 0..n-1 (rts) and the IRQs follow snap's
// cpu_map and irq sections (Apply's last fallible step, e.mu held). At the
// first Apply (start) nothing is fatal: what cannot be applied becomes a
// warning (PinWarnings, the log). Later, an OS refusal is a
// *config.ApplyError with the *pin.PinError inside and everything applyPins
// changed is restored; undo restores it after a later failure too.
func (e *Engine) applyPins(ctx context.Context, snap *config.Config, rts []*loopRT, first bool) (undo func(), err error) {
	var u pinUndo
	var thrWarn []string // cpu_map warnings; only a first Apply has any
	undo = func() { e.undoThreadPins(u.threads) }

	// Threads.
	allowed, aerr := e.th.fs.AffinityMask()
	if aerr != nil && snap.CPUMap.Mode == config.CPUMapAuto {
		if !first {
			return nil, &config.ApplyError{Field: "/cpu_map/mode", Object: "cpu_map", Err: aerr}
		}
		thrWarn = append(thrWarn, "cpu_map auto: cannot read the process affinity mask: "+aerr.Error())
	}
	masks, fields := CPUMapMasks(snap.CPUMap, len(rts), allowed)
	type job struct {
		rt   *loopRT
		i    int
		want []int
	}
	var jobs []job
	for i, rt := range rts {
		if first || !slices.Equal(rt.cpus, masks[i]) {
			jobs = append(jobs, job{rt, i, masks[i]})
		}
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for k, j := range jobs {
		target := j.want
		if target == nil {
			target = j.rt.orig
		}
		if target == nil {
			continue // unpinned and the original mask unknown: leave it
		}
		wg.Add(1)
		if !j.rt.l.Exec(func(*loop.Loop) {
			errs[k] = pin.SetThreadAffinity(target)
			wg.Done()
		}) {
			errs[k] = errors.New("loop stopped")
			wg.Done()
		}
	}
	if werr := waitGroup(ctx, &wg); werr != nil {
		return nil, werr
	}
	for k, j := range jobs {
		if errs[k] == nil {
			u.threads = append(u.threads, threadUndo{j.rt, j.rt.cpus})
			j.rt.cpus = slices.Clone(j.want)
			continue
		}
		if first {
			j.rt.cpus = slices.Clone(j.want) // configured; Threads shows what was granted
			thrWarn = append(thrWarn, fmt.Sprintf("cpu_map: thread %d: %v", j.i, errs[k]))
			continue
		}
		undo()
		field := fields[j.i]
		if field == "" {
			field = "/cpu_map"
		}
		return nil, &config.ApplyError{Field: field, Object: "cpu_map thread " + strconv.Itoa(j.i), Err: errs[k]}
	}

	// IRQs.
	irqWarn, ierr := e.applyIRQs(snap, masks, first)
	if ierr != nil {
		undo()
		return nil, ierr
	}
	if first || len(jobs) > 0 || irqWarn != nil {
		all := append(thrWarn, irqWarn...)
		if !first {
			// Keep the start warnings of the parts this Apply did not touch.
			if p := e.th.warnings.Load(); p != nil {
				for _, w := range *p {
					if (strings.HasPrefix(w, "irq") && irqWarn == nil) || (strings.HasPrefix(w, "cpu_map") && len(jobs) == 0) {
						all = append(all, w)
					}
				}
			}
		}
		for _, w := range all {
			e.log.Warn("pin not applied", "warning", w)
		}
		if all == nil {
			all = []string{}
		}
		e.th.warnings.Store(&all)
	}
	return undo, nil
}

func (e *Engine) undoThreadPins(us []threadUndo) {
	var wg sync.WaitGroup
	for _, u := range us {
		target := u.prev
		if target == nil {
			target = u.rt.orig
		}
		u.rt.cpus = u.prev
		if target == nil {
			continue
		}
		wg.Add(1)
		if !u.rt.l.Exec(func(*loop.Loop) {
			if err := pin.SetThreadAffinity(target); err != nil {
				e.log.Error("could not restore a loop thread's CPU mask", "err", err)
			}
			wg.Done()
		}) {
			wg.Done()
		}
	}
	wg.Wait()
}

// applyIRQs writes the IRQ affinities snap asks for: the separate policy's
// placement (from the loop CPUs in masks) merged with the explicit pins
// (e.mu held). It writes nothing when the wanted placement is what the last
// Apply wrote. The returned warnings are nil when nothing was (re)applied.
func (e *Engine) applyIRQs(snap *config.Config, masks [][]int, first bool) ([]string, error) {
	q := &snap.IRQ
	fs := e.th.fs
	var policy map[int][]int
	var warn []string
	if q.Policy == config.IRQPolicySeparate {
		var loopCPUs []int
		for _, m := range masks {
			loopCPUs = append(loopCPUs, m...)
		}
		slices.Sort(loopCPUs)
		loopCPUs = slices.Compact(loopCPUs)
		topo, err := fs.Topology()
		var irqs []pin.IRQ
		if err == nil {
			irqs, err = fs.IRQs()
		}
		var plan pin.SeparatePlan
		if err == nil {
			plan, err = pin.PlanSeparateDetail(topo, loopCPUs, irqs, q.NICs)
		}
		if err != nil {
			if !first {
				return nil, &config.ApplyError{Field: "/irq/policy", Object: "irq policy separate", Err: err}
			}
			warn = append(warn, "irq policy separate: "+err.Error())
		}
		policy = plan.Pins
		for _, w := range plan.Warnings {
			warn = append(warn, "irq policy separate: "+w)
		}
	}
	want := pin.MergePins(policy, q.Pins)
	wanted := maps.Clone(want) // the loop below may drop IRQs from want
	if !first && maps.EqualFunc(wanted, e.th.irqs, slices.Equal[[]int]) {
		return nil, nil
	}
	explicit := map[int]int{}
	for k, p := range q.Pins {
		explicit[p.IRQ] = k
	}
	if first {
		// One at a time: a pin that cannot be applied any more does not
		// keep the others from being applied.
		for _, irq := range slices.Sorted(maps.Keys(want)) {
			if err := fs.ApplyIRQPins(map[int][]int{irq: want[irq]}); err != nil {
				warn = append(warn, err.Error()) // a *pin.PinError naming the IRQ
			}
		}
		e.th.irqs = wanted
		if warn == nil {
			warn = []string{}
		}
		return warn, nil
	}
	for {
		err := fs.ApplyIRQPins(want)
		if err == nil {
			break
		}
		var pe *pin.PinError
		irq, ok := failedIRQ(err, &pe)
		if _, isExplicit := explicit[irq]; ok && pe.Managed() && !isExplicit {
			// The policy placed an IRQ the kernel will not move: skip it.
			warn = append(warn, "irq policy separate: irq "+strconv.Itoa(irq)+" is kernel-managed, left where it is")
			delete(want, irq)
			continue
		}
		field, object := "/irq", "irq"
		if k, isExplicit := explicit[irq]; ok && isExplicit {
			field, object = "/irq/pins/"+strconv.Itoa(k)+"/cpus", "irq pin"
		} else if q.Policy == config.IRQPolicySeparate {
			field, object = "/irq/policy", "irq policy separate"
		}
		return nil, &config.ApplyError{Field: field, Object: object, Err: err}
	}
	e.th.irqs = wanted
	if warn == nil {
		warn = []string{}
	}
	return warn, nil
}

// failedIRQ finds the *pin.PinError in err and the IRQ it names.
func failedIRQ(err error, pe **pin.PinError) (int, bool) {
	if !errors.As(err, pe) {
		return -1, false
	}
	n, perr := strconv.Atoi(strings.TrimPrefix((*pe).What, "irq "))
	if perr != nil {
		return -1, false
	}
	return n, true
}

// waitGroup waits for wg or ctx.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
