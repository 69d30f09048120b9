package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/pin"
)

// Placement endpoints: the CPU map of the loop threads and the
// IRQs. Both are part of the config (cpu_map, irq.pins): a write goes
// through the store like every other one and the core applies it; an OS
// refusal comes back as *config.ApplyError with the *pin.PinError inside,
// i.e. 409 with the errno and a hint, nothing changed.
//
// The views show what this node runs: its section of the document's nodes
// member (nodes.go) replaces cpu_map and irq when it has them. Writes here
// change the document's values (every node without its own); their ETags
// are those of the document's values.

// CPUMapView is GET /api/v1/cpu-map: the configured map and, per loop
// thread, what the kernel granted.
type CPUMapView struct {
	// Mode is none (threads keep the process mask), auto (loop i on the
	// i-th CPU of the process mask) or manual (threads below).
	Mode    string              `json:"mode" example:"manual" enums:"none,auto,manual"`
	Threads []config.ThreadCPUs `json:"threads"`
	// Node is set when this map is this node's own (its section of the
	// document's nodes member, /api/v1/cluster/nodes/{name}/settings),
	// which replaces the document's cpu_map here.
	Node string `json:"node,omitempty" example:"edge-1"`
	// Allowed is the process affinity mask (what auto distributes).
	Allowed []int `json:"allowed" example:"0,1"`
	// Loops is every running loop thread, read back from the kernel.
	Loops []core.ThreadState `json:"loops"`
}

// IRQView is one IRQ of GET /api/v1/irqs: what /proc and /sys say, and the
// explicit pin of the config when there is one.
type IRQView struct {
	pin.IRQ
	// Pinned is the CPU list of the config's explicit pin (irq.pins, or
	// this node's own irq when its section of nodes has one) for this
	// IRQ; absent when the IRQ is not pinned explicitly.
	Pinned []int `json:"pinned,omitempty" example:"1"`
}

// IRQPinBody is the body of PUT /api/v1/irqs/{irq}.
type IRQPinBody struct {
	CPUs []int `json:"cpus" example:"1"`
}

// placement is the config whose cpu_map and irq this node runs: the
// document with this node's section applied.
func (s *server) placement(c *config.Config) *config.Config {
	return c.WithNodeSettings(s.node.Name)
}

func (s *server) cpuMapView(c *config.Config) CPUMapView {
	m := s.placement(c).CPUMap
	v := CPUMapView{Mode: m.Mode, Threads: m.Threads, Loops: s.core.Threads()}
	if sec, ok := c.Nodes[s.node.Name]; ok && sec.CPUMap != nil {
		v.Node = s.node.Name
	}
	if v.Threads == nil {
		v.Threads = []config.ThreadCPUs{}
	}
	if m, err := s.core.AffinityMask(); err == nil {
		v.Allowed = m
	}
	return v
}

// writeLive answers a view that mixes config and live kernel state: the
// ETag is that of the config part (what If-Match on the matching PUT
// compares), and no 304 is given (the live part changes on its own).
func writeLive(w http.ResponseWriter, c *config.Config, cfgPart, v any) error {
	h := w.Header()
	if tag, err := etagOf(cfgPart); err == nil {
		h.Set("ETag", tag)
	}
	h.Set("X-Spliced-Generation", strconv.FormatInt(c.Generation, 10))
	h.Set("Cache-Control", "no-store")
	return writeValue(w, http.StatusOK, v)
}

// getCPUMap godoc
//
//	@Summary		CPU map of the loop threads
//	@Description	The configured map (mode none, auto or manual with threads) and, per running loop thread, its kernel tid, the CPUs the map gives it (configured, null = not pinned) and the mask the kernel reports for it now (granted, sched_getaffinity of the tid). The map is the one this node runs: its own (node set) when its section of the document's nodes member has a cpu_map, else the document's. The ETag covers the document's cpu_map (what PUT changes and If-Match compares).
//	@Tags			placement
//	@Produce		json
//	@Success		200	{object}	CPUMapView
//	@Header			200	{string}	ETag	"strong ETag of the configured map"
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/cpu-map [get]
func (s *server) getCPUMap(w http.ResponseWriter, r *http.Request) error {
	c := s.store.Current()
	return writeLive(w, c, c.CPUMap, s.cpuMapView(c))
}

// putCPUMap godoc
//
//	@Summary		Set the CPU map of the loop threads
//	@Description	Applied at run time: each loop thread sets its own affinity (no privilege needed). mode auto puts loop i on the i-th CPU of the process mask; manual pins the listed threads (others keep the process mask); none unpins every thread. Persisted in the config (cpu_map): the document's map, which nodes with a cpu_map of their own (/api/v1/cluster/nodes/{name}/settings) do not run. The result shows what the kernel granted.
//	@Tags			placement
//	@Accept			json
//	@Produce		json
//	@Param			cpu_map		body		config.CPUMap	true	"the map"
//	@Param			dry_run		query		bool			false	"return the plan and change nothing"
//	@Param			If-Match	header		string			false	"ETag the map must still have"
//	@Success		200			{object}	WriteResult{result=CPUMapView}
//	@Header			200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem
//	@Failure		409			{object}	Problem	"the kernel refused the affinity; nothing changed"
//	@Failure		412			{object}	Problem
//	@Failure		503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure		413			{object}	Problem	"body over --admin-max-body"
//	@Failure		415			{object}	Problem
//	@Failure		422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router			/api/v1/cpu-map [put]
func (s *server) putCPUMap(w http.ResponseWriter, r *http.Request) error {
	var in config.CPUMap
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	return s.write(w, r, writeOp{
		target: func(c *config.Config) (any, error) { return c.CPUMap, nil },
		mutate: func(c *config.Config) (string, error) {
			c.CPUMap = in
			return "/cpu_map", nil
		},
		result: func(c *config.Config) any { return s.cpuMapView(c) },
		status: http.StatusOK,
	})
}

func (s *server) irqViews(c *config.Config, irqs []pin.IRQ) []IRQView {
	pins := s.placement(c).IRQ.Pins
	out := make([]IRQView, len(irqs))
	for i, q := range irqs {
		out[i] = IRQView{IRQ: q}
		if k := slices.IndexFunc(pins, func(p config.IRQPin) bool { return p.IRQ == q.IRQ }); k >= 0 {
			out[i].Pinned = pins[k].CPUs
		}
		if out[i].Counts == nil {
			out[i].Counts = map[int]uint64{}
		}
	}
	return out
}

// listIRQs godoc
//
//	@Summary		IRQs with their affinity and counts
//	@Description	Every numbered line of /proc/interrupts: per-CPU counts, chip, name, the NIC it belongs to (from /sys/class/net/*/device/msi_irqs), smp_affinity_list (affinity), effective_affinity_list (effective), managed when known (null = unknown), and the config's explicit pin (pinned: this node's own irq when its section of the document's nodes member has one, else the document's). Reading needs no privilege.
//	@Tags			placement
//	@Produce		json
//	@Success		200	{array}		IRQView
//	@Failure		500	{object}	Problem
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/irqs [get]
func (s *server) listIRQs(w http.ResponseWriter, r *http.Request) error {
	c := s.store.Current()
	irqs, err := s.core.IRQs()
	if err != nil {
		return fmt.Errorf("read IRQs: %w", err)
	}
	return writeLive(w, c, c.IRQ, s.irqViews(c, irqs))
}

// irqParam parses {irq}.
func irqParam(r *http.Request) (int, error) {
	v := param(r, "irq")
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, &apiError{Status: http.StatusNotFound, Code: "not-found", Detail: "no such IRQ: " + truncate(v, 40)}
	}
	return n, nil
}

func pinOf(c *config.Config, irq int) *config.IRQPin {
	for i := range c.IRQ.Pins {
		if c.IRQ.Pins[i].IRQ == irq {
			return &c.IRQ.Pins[i]
		}
	}
	return nil
}

// getIRQ godoc
//
//	@Summary		One IRQ
//	@Description	As one element of GET /api/v1/irqs. The ETag covers the config's pin of this IRQ.
//	@Tags			placement
//	@Produce		json
//	@Param			irq	path		integer	true	"IRQ number"
//	@Success		200	{object}	IRQView
//	@Failure		404	{object}	Problem
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/irqs/{irq} [get]
func (s *server) getIRQ(w http.ResponseWriter, r *http.Request) error {
	n, err := irqParam(r)
	if err != nil {
		return err
	}
	q, err := s.core.IRQ(n)
	if err != nil {
		return err
	}
	c := s.store.Current()
	return writeLive(w, c, pinOf(c, n), s.irqViews(c, []pin.IRQ{q})[0])
}

// putIRQ godoc
//
//	@Summary		Set the affinity of one IRQ
//	@Description	Stored as an explicit pin in the config (irq.pins: persisted, in revisions, re-applied at start) and written to /proc/irq/N/smp_affinity_list. Needs root (uid 0 or CAP_DAC_OVERRIDE) and a writable /proc. Not root, a kernel-managed IRQ or an offline CPU: 409 with the OS error and a hint, nothing changed (config and affinities).
//	@Tags			placement
//	@Accept			json
//	@Produce		json
//	@Param			irq			path		integer		true	"IRQ number"
//	@Param			pin			body		IRQPinBody	true	"the CPUs"
//	@Param			dry_run		query		bool		false	"return the plan and change nothing"
//	@Param			If-Match	header		string		false	"ETag the pin must still have"
//	@Success		200			{object}	WriteResult{result=IRQView}
//	@Header			200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem
//	@Failure		404			{object}	Problem
//	@Failure		409			{object}	Problem	"the kernel refused the affinity; nothing changed"
//	@Failure		412			{object}	Problem
//	@Failure		503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure		413			{object}	Problem	"body over --admin-max-body"
//	@Failure		415			{object}	Problem
//	@Failure		422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router			/api/v1/irqs/{irq} [put]
func (s *server) putIRQ(w http.ResponseWriter, r *http.Request) error {
	n, err := irqParam(r)
	if err != nil {
		return err
	}
	var in IRQPinBody
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	if _, err := s.core.IRQ(n); err != nil {
		return err
	}
	return s.write(w, r, writeOp{
		target: func(c *config.Config) (any, error) { return pinOf(c, n), nil },
		mutate: func(c *config.Config) (string, error) {
			if p := pinOf(c, n); p != nil {
				p.CPUs = in.CPUs
			} else {
				c.IRQ.Pins = append(c.IRQ.Pins, config.IRQPin{IRQ: n, CPUs: in.CPUs})
				slices.SortFunc(c.IRQ.Pins, func(a, b config.IRQPin) int { return a.IRQ - b.IRQ })
			}
			k := slices.IndexFunc(c.IRQ.Pins, func(p config.IRQPin) bool { return p.IRQ == n })
			return "/irq/pins/" + strconv.Itoa(k), nil
		},
		result: func(c *config.Config) any {
			q, err := s.core.IRQ(n)
			if err != nil {
				q = pin.IRQ{IRQ: n}
			}
			return s.irqViews(c, []pin.IRQ{q})[0]
		},
		status: http.StatusOK,
	})
}
