package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func intp(n int) *int { return &n }

// nodeConfig is goodConfig with a public frontend listening on each node's
// address and two node sections.
func nodeConfig() *Config {
	c := goodConfig()
	c.Frontends[0].Binds = append(c.Frontends[0].Binds, Bind{Name: "node", Address: NodeAddress, Port: 80})
	c.Nodes = map[string]NodeSettings{
		"edge-1": {Nbthread: intp(4), CPUMap: &CPUMap{Mode: CPUMapAuto}},
		"edge-2": {IRQ: &IRQ{Pins: []IRQPin{{IRQ: 30, CPUs: []int{7}}}}},
	}
	c.Normalize()
	return c
}

func TestForNode(t *testing.T) {
	c := nodeConfig()
	if err := Validate(c, Env{}); err != nil {
		t.Fatalf("nodeConfig does not validate: %v", err)
	}
	before, _ := json.Marshal(c)

	t.Run("section and address applied", func(t *testing.T) {
		got, err := c.ForNode("edge-1", "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		if got == c {
			t.Fatal("ForNode returned the document itself")
		}
		if got.Tuning.Nbthread != 4 || got.CPUMap.Mode != CPUMapAuto || len(got.CPUMap.Threads) != 0 {
			t.Errorf("section not applied: nbthread %d cpu_map %+v", got.Tuning.Nbthread, got.CPUMap)
		}
		if &got.IRQ.Pins[0] != &c.IRQ.Pins[0] || got.IRQ.Policy != c.IRQ.Policy {
			t.Errorf("irq %+v, want the document's %+v", got.IRQ, c.IRQ)
		}
		if a := got.Frontends[0].Binds[2].Address; a != "192.0.2.1" {
			t.Errorf("bind address %q, want 192.0.2.1", a)
		}
		if got.Frontends[0].Binds[0].Address != "127.0.0.1" || got.Frontends[1].Binds[0].Address != "*" {
			t.Error("literal addresses changed")
		}
		// What ForNode does not change is shared, not copied.
		if &got.Backends[0] != &c.Backends[0] || &got.Frontends[1].Binds[0] != &c.Frontends[1].Binds[0] {
			t.Error("unchanged parts were copied")
		}
		if err := Validate(got, Env{NodeName: "edge-1", CPUs: []int{0, 1, 2, 3}}); err != nil {
			t.Errorf("the node's config does not validate on its machine: %v", err)
		}
	})
	t.Run("only the irq of edge-2", func(t *testing.T) {
		got, err := c.ForNode("edge-2", "192.0.2.2")
		if err != nil {
			t.Fatal(err)
		}
		if got.Tuning.Nbthread != 2 || got.CPUMap.Mode != CPUMapManual {
			t.Errorf("document values not kept: nbthread %d cpu_map %q", got.Tuning.Nbthread, got.CPUMap.Mode)
		}
		if len(got.IRQ.Pins) != 1 || got.IRQ.Pins[0].IRQ != 30 || got.IRQ.Policy != IRQPolicyNone {
			t.Errorf("irq %+v, want edge-2's", got.IRQ)
		}
	})
	t.Run("a node without section gets the document's values", func(t *testing.T) {
		got, err := c.ForNode("edge-3", "2001:db8::3")
		if err != nil {
			t.Fatal(err)
		}
		if got.Tuning.Nbthread != 2 || got.CPUMap.Mode != CPUMapManual || got.Frontends[0].Binds[2].Address != "2001:db8::3" {
			t.Errorf("got nbthread %d cpu_map %q address %q", got.Tuning.Nbthread, got.CPUMap.Mode, got.Frontends[0].Binds[2].Address)
		}
	})
	t.Run("placeholder without address", func(t *testing.T) {
		got, err := c.ForNode("edge-1", "")
		var ve *ValidationError
		if got != nil || !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
			t.Fatalf("ForNode = %v, %v; want a *ValidationError", got, err)
		}
		if len(ve.Errors) != 1 || ve.Errors[0].Field != "/frontends/0/binds/2/address" || ve.Errors[0].Code != CodeInvalid ||
			!strings.Contains(ve.Errors[0].Message, "--node-address") {
			t.Errorf("problems %+v", ve.Errors)
		}
	})
	after, _ := json.Marshal(c)
	if string(before) != string(after) {
		t.Fatal("ForNode changed the document")
	}

	t.Run("nothing to change: the document itself", func(t *testing.T) {
		d := goodConfig()
		d.Nodes = map[string]NodeSettings{"edge-1": {Nbthread: intp(8)}, "empty": {}}
		for _, name := range []string{"", "edge-2", "empty"} {
			got, err := d.ForNode(name, "")
			if err != nil || got != d || d.WithNodeSettings(name) != d {
				t.Errorf("ForNode(%q) = %p, %v; want the receiver %p", name, got, err, d)
			}
		}
		if w := d.WithNodeSettings("edge-1"); w == d || w.Tuning.Nbthread != 8 || d.Tuning.Nbthread != 2 {
			t.Errorf("WithNodeSettings(edge-1): nbthread %d, document's %d", w.Tuning.Nbthread, d.Tuning.Nbthread)
		}
	})
}

// ForNode runs on every apply, of documents with 10 000 servers: when the
// node has no section and no bind uses NodeAddress it must cost nothing.
func TestForNodeWithoutChangeDoesNotAllocate(t *testing.T) {
	c := goodConfig()
	for i := range 10000 {
		c.Backends[0].Servers = append(c.Backends[0].Servers, &Server{Name: fmt.Sprintf("x%d", i), Address: "127.0.0.1", Port: 1000 + i%60000})
	}
	c.Nodes = map[string]NodeSettings{"other": {Nbthread: intp(1)}}
	c.Normalize()
	allocs := testing.AllocsPerRun(100, func() {
		if got, err := c.ForNode("edge-1", "192.0.2.1"); got != c || err != nil {
			t.Fatalf("ForNode = %p, %v", got, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("ForNode allocates %v times without a change", allocs)
	}
}

func TestValidateNodes(t *testing.T) {
	edge1 := Env{NodeName: "edge-1", CPUs: []int{0, 1, 2, 3}}
	tests := []struct {
		name   string
		mutate func(c *Config)
		env    Env
		want   []want
	}{
		{name: "sections pass without env", mutate: func(c *Config) {}},
		{name: "sections pass on edge-1", mutate: func(c *Config) {}, env: edge1},
		{name: "node name format", mutate: func(c *Config) { c.Nodes["Edge.1"] = NodeSettings{} },
			want: []want{{"/nodes/Edge.1", CodeFormat}}},
		{name: "empty node name", mutate: func(c *Config) { c.Nodes[""] = NodeSettings{} },
			want: []want{{"/nodes/", CodeFormat}}},
		{name: "node name escaped in the pointer", mutate: func(c *Config) { c.Nodes["a/b"] = NodeSettings{} },
			want: []want{{"/nodes/a~1b", CodeFormat}}},
		{name: "nbthread range", mutate: func(c *Config) { c.Nodes["edge-1"] = NodeSettings{Nbthread: intp(1025)} },
			want: []want{{"/nodes/edge-1/nbthread", CodeOutOfRange}}},
		{name: "nbthread 0 is the machine's", mutate: func(c *Config) { c.Nodes["edge-3"] = NodeSettings{Nbthread: intp(0)} }},
		{name: "cpu_map field rules", mutate: func(c *Config) {
			c.Nodes["edge-1"].CPUMap.Mode = "pinned"
		}, want: []want{{"/nodes/edge-1/cpu_map/mode", CodeModeMismatch}, {"/nodes/edge-1/cpu_map/mode", CodeOneOf}}}, // irq policy separate
		{name: "cpu_map manual needs threads", mutate: func(c *Config) {
			c.Nodes["edge-1"].CPUMap.Mode = CPUMapManual
		}, want: []want{{"/nodes/edge-1/cpu_map/threads", CodeRequired}}},
		{name: "cpu_map thread beyond the node's nbthread", mutate: func(c *Config) {
			*c.Nodes["edge-1"].CPUMap = CPUMap{Mode: CPUMapManual, Threads: []ThreadCPUs{{Thread: 4, CPUs: []int{0}}}}
		}, want: []want{{"/nodes/edge-1/cpu_map/threads/0/thread", CodeOutOfRange}}},
		{name: "bind thread beyond the node's nbthread", mutate: func(c *Config) {
			c.Nodes["edge-1"] = NodeSettings{Nbthread: intp(1), CPUMap: &CPUMap{Mode: CPUMapAuto}}
		}, want: []want{{"/nodes/edge-1/nbthread", CodeOutOfRange}}}, // bind b2 runs on thread 1
		{name: "document cpu_map thread beyond the node's nbthread", mutate: func(c *Config) {
			c.Frontends[0].Binds[1].Threads = nil
			c.Nodes["edge-3"] = NodeSettings{Nbthread: intp(1)}
		}, want: []want{{"/nodes/edge-3/nbthread", CodeOutOfRange}}},
		{name: "irq rules", mutate: func(c *Config) {
			c.Nodes["edge-2"].IRQ.Pins = append(c.Nodes["edge-2"].IRQ.Pins, IRQPin{IRQ: 30, CPUs: []int{1}})
			c.Nodes["edge-2"].IRQ.NICs = []string{"a/b"}
		}, want: []want{{"/nodes/edge-2/irq/nics/0", CodeFormat}, {"/nodes/edge-2/irq/pins/1/irq", CodeDuplicate}}},
		{name: "irq separate needs the node's loops pinned", mutate: func(c *Config) {
			c.Nodes["edge-2"] = NodeSettings{CPUMap: &CPUMap{Mode: CPUMapNone}}
		}, want: []want{{"/nodes/edge-2/cpu_map/mode", CodeModeMismatch}}},
		{name: "irq separate in a section", mutate: func(c *Config) {
			c.Nodes["edge-2"] = NodeSettings{CPUMap: &CPUMap{Mode: CPUMapNone}, IRQ: &IRQ{Policy: IRQPolicySeparate}}
		}, want: []want{{"/nodes/edge-2/irq/policy", CodeModeMismatch}}},
		{name: "CPUs of other nodes are not checked here", mutate: func(c *Config) {}, env: Env{NodeName: "edge-1", CPUs: []int{0, 1, 2, 3}}},
		{name: "CPUs of this node's section are checked", mutate: func(c *Config) {}, env: Env{NodeName: "edge-2", CPUs: []int{0, 1, 2, 3}},
			want: []want{{"/nodes/edge-2/irq/pins/0/cpus/0", CodeCPUUnknown}}},
		{name: "the document's values this node replaces are not checked against it", mutate: func(c *Config) {
			c.CPUMap.Threads[1].CPUs = []int{9}
			c.IRQ.Pins[0].CPUs = []int{9}
			c.Nodes["edge-1"] = NodeSettings{CPUMap: &CPUMap{Mode: CPUMapAuto}, IRQ: &IRQ{}}
			c.Normalize()
		}, env: edge1},
		{name: "the document's values are checked where the section keeps them", mutate: func(c *Config) {
			c.IRQ.Pins[0].CPUs = []int{9}
		}, env: edge1, want: []want{{"/irq/pins/0/cpus/0", CodeCPUUnknown}}},
		{name: "nbthread 0 on this node: its CPU count bounds bind threads", mutate: func(c *Config) {
			c.Nodes["edge-1"] = NodeSettings{Nbthread: intp(0), CPUMap: &CPUMap{Mode: CPUMapAuto}}
			c.Frontends[0].Binds[1].Threads = []int{4}
		}, env: edge1, want: []want{{"/frontends/0/binds/1/threads/0", CodeOutOfRange}, {"/nodes/edge-1/nbthread", CodeOutOfRange}}},
		{name: "this node's nbthread replaces the document's for bind threads", mutate: func(c *Config) {
			c.Tuning.Nbthread = 0
			c.CPUMap = CPUMap{Mode: CPUMapAuto}
			c.Nodes["edge-1"] = NodeSettings{Nbthread: intp(8)}
			c.Frontends[0].Binds[1].Threads = []int{7}
		}, env: edge1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := nodeConfig()
			tt.mutate(c)
			err := Validate(c, tt.env)
			if got := fieldErrors(t, err); !slices.Equal(got, tt.want) {
				t.Fatalf("Validate() problems\n got: %v\nwant: %v\n err: %v", got, tt.want, err)
			}
		})
	}
}

func TestNodeAddressConflicts(t *testing.T) {
	tests := []struct {
		name    string
		address string
		port    int
		clash   bool
	}{
		{"same placeholder, same port", NodeAddress, 80, true},
		{"same placeholder, other port", NodeAddress, 81, false},
		{"IPv4 unspecified", "*", 80, true},
		{"IPv4 unspecified literal", "0.0.0.0", 80, true},
		{"IPv6 unspecified", "::", 80, true},
		{"another literal", "192.0.2.1", 80, false},
		{"loopback", "127.0.0.1", 80, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := nodeConfig()
			c.Frontends[1].Binds = append(c.Frontends[1].Binds, Bind{Name: "x", Address: tt.address, Port: tt.port})
			c.Normalize()
			var wants []want
			if tt.clash {
				wants = []want{{"/frontends/1/binds/1", CodeAddressConflict}}
			}
			err := Validate(c, Env{})
			if got := fieldErrors(t, err); !slices.Equal(got, wants) {
				t.Fatalf("problems %v, want %v (%v)", got, wants, err)
			}
			if tt.clash && !strings.Contains(err.Error(), "overlaps /frontends/0/binds/2") {
				t.Errorf("message %q does not name the other bind", err)
			}
		})
	}
	t.Run("placeholder is the only one", func(t *testing.T) {
		c := nodeConfig()
		c.Frontends[0].Binds[2].Address = "${NODE_NAME}"
		if got := fieldErrors(t, Validate(c, Env{})); !slices.Equal(got, []want{{"/frontends/0/binds/2/address", CodeFormat}}) {
			t.Fatalf("problems %v", got)
		}
	})
}

func TestDiffNodes(t *testing.T) {
	old := nodeConfig()
	new := old.Clone()
	new.Nodes["edge-1"] = NodeSettings{Nbthread: intp(2), CPUMap: new.Nodes["edge-1"].CPUMap} // 2 = the document's
	new.Nodes["edge-2"].IRQ.Pins[0].CPUs = []int{6}
	new.Nodes["edge-0"] = NodeSettings{Nbthread: intp(3)}
	delete(new.Nodes, "edge-2")
	new.Nodes["edge-2"] = NodeSettings{IRQ: &IRQ{Policy: IRQPolicyNone, Pins: []IRQPin{{IRQ: 30, CPUs: []int{6}}}}}
	new.Nodes["edge-4"] = NodeSettings{}
	old.Nodes["edge-9"] = NodeSettings{Nbthread: intp(2)}
	got := Diff(old, new).Items
	want := []PlanItem{
		{Object: "node/edge-0", Op: OpCreate, Apply: ApplyRestartLoops},
		{Object: "node/edge-1", Op: OpUpdate, Apply: ApplyRestartLoops, Fields: []string{"nbthread"}},
		{Object: "node/edge-2", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"irq"}},
		{Object: "node/edge-4", Op: OpCreate, Apply: ApplyInPlace},
		{Object: "node/edge-9", Op: OpDelete, Apply: ApplyInPlace},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("plan\n got %v\nwant %v", got, want)
	}
	if p := Diff(old, old.Clone()); !p.Empty() {
		t.Fatalf("a clone differs: %v", p.Items)
	}
	empty, none := goodConfig(), goodConfig()
	empty.Nodes = map[string]NodeSettings{}
	if p := Diff(none, empty); !p.Empty() {
		t.Fatalf("no sections and an empty map differ: %v", p.Items)
	}
}

func TestNodesDecodeAndNormalize(t *testing.T) {
	var c Config
	err := DecodeBytes([]byte(`{"nodes":{"edge-1":{"nbthread":4,"cpu_map":{"threads":[]},"irq":{}},"edge-2":{}}}`), &c)
	if err != nil {
		t.Fatal(err)
	}
	c.Normalize()
	s := c.Nodes["edge-1"]
	if *s.Nbthread != 4 || s.CPUMap.Mode != CPUMapNone || s.IRQ.Policy != IRQPolicyNone {
		t.Fatalf("section %+v %+v %+v", *s.Nbthread, *s.CPUMap, *s.IRQ)
	}
	if e := c.Nodes["edge-2"]; e.Nbthread != nil || e.CPUMap != nil || e.IRQ != nil {
		t.Fatalf("empty section %+v", e)
	}
	var de *DecodeError
	if err := DecodeBytes([]byte(`{"nodes":{"edge-1":{"maxconn":4}}}`), &c); !errors.As(err, &de) ||
		de.Code != DecodeUnknownField || de.Field != "/nodes/edge-1/maxconn" {
		t.Fatalf("unknown member in a section: %v", err)
	}
	b, _ := json.Marshal(goodConfig())
	if strings.Contains(string(b), `"nodes"`) {
		t.Fatalf("a document without sections has a nodes member: %s", b)
	}
}
