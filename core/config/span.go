package config

import (
	"context"
)

// A write changes a few servers among many: one PATCH, one POST, one
// DELETE. Validation, the plan, the stored delta and the data plane each
// need only what changed, so the store compares the lists of servers once
// (serverSpans) and hands the result to each of them, instead of each
// comparing 10 000 servers again.

// ServerSpan compares two lists of servers from their ends: the first head
// servers of a and b are equal pairwise (Server.equal, names included), as
// are their last tail servers, with head+tail ≤ min(len(a), len(b)). What
// lies between, a[head:len(a)-tail] and b[head:len(b)-tail], is where they
// differ: empty for equal lists, one server for a changed one. Lists that
// are the same slice compare in constant time; the same pointer is the
// same server (a *Server reachable from a published config is never
// written, see Backend.Servers), so a list copied by OwnServers compares
// 8 bytes per server, and Server.equal runs only where the pointers differ.
func ServerSpan(a, b []*Server) (head, tail int) {
	n := min(len(a), len(b))
	if len(a) == len(b) && (n == 0 || &a[0] == &b[0]) {
		return n, 0
	}
	for head < n && sameServer(a[head], b[head]) {
		head++
	}
	for tail < n-head && sameServer(a[len(a)-1-tail], b[len(b)-1-tail]) {
		tail++
	}
	return head, tail
}

// sameServer is Server.equal with the fast path of the same pointer.
func sameServer(a, b *Server) bool { return a == b || a.equal(b) }

// listSpan is how the servers of one backend of a config differ from
// those of the backend of the same name in the config before it.
type listSpan struct {
	old        []*Server // the previous servers; nil when there was no such backend
	had        bool      // the previous config had a backend of that name
	oldMode    string    // its mode
	head, tail int       // ServerSpan(old, new)
}

// window returns the servers of old and of cur that differ (see ServerSpan).
func (s *listSpan) window(cur []*Server) (old, new []*Server) {
	return s.old[s.head : len(s.old)-s.tail], cur[s.head : len(cur)-s.tail]
}

// serverSpans returns, for each backend of next, the span of its servers
// against prev's backend of the same name; nil when prev is nil.
func serverSpans(prev, next *Config) []listSpan {
	if prev == nil {
		return nil
	}
	out := make([]listSpan, len(next.Backends))
	var at map[string]int // prev's backends by name, built when positions moved
	for i := range next.Backends {
		b := &next.Backends[i]
		k := -1
		if i < len(prev.Backends) && prev.Backends[i].Name == b.Name {
			k = i
		} else {
			if at == nil {
				at = make(map[string]int, len(prev.Backends))
				for j := range prev.Backends {
					if _, dup := at[prev.Backends[j].Name]; !dup {
						at[prev.Backends[j].Name] = j
					}
				}
			}
			if j, ok := at[b.Name]; ok {
				k = j
			}
		}
		if k < 0 {
			continue
		}
		pb := &prev.Backends[k]
		h, t := ServerSpan(pb.Servers, b.Servers)
		out[i] = listSpan{old: pb.Servers, had: true, oldMode: pb.Mode, head: h, tail: t}
	}
	return out
}

// ChangeSpans are the spans of servers (ServerSpan) the store found
// between the config a write was built on and the config it made: the
// data plane that applies the write finds there where a backend's servers
// differ instead of comparing 10 000 servers again (Store.Update hands
// them to UpdateOptions.Apply in its context: SpansOf).
type ChangeSpans struct {
	cur, next *Config
	spans     []listSpan
}

type spansKey struct{}

// withSpans returns ctx carrying the spans of next against cur.
func withSpans(ctx context.Context, cur, next *Config, spans []listSpan) context.Context {
	if spans == nil {
		return ctx
	}
	return context.WithValue(ctx, spansKey{}, &ChangeSpans{cur: cur, next: next, spans: spans})
}

// SpansOf returns the spans ctx carries, or nil (whose Servers compares).
func SpansOf(ctx context.Context) *ChangeSpans {
	s, _ := ctx.Value(spansKey{}).(*ChangeSpans)
	return s
}

// Servers returns ServerSpan(old.Servers, next.Backends[i].Servers), where
// old is a backend of prev: the store's when prev and next are the configs
// it compared and old is the backend it matched with next's i-th, else
// computed.
func (s *ChangeSpans) Servers(prev *Config, old *Backend, next *Config, i int) (head, tail int) {
	cur := next.Backends[i].Servers
	if s != nil && s.cur == prev && s.next == next && i < len(s.spans) && s.spans[i].had && sameList(s.spans[i].old, old.Servers) {
		return s.spans[i].head, s.spans[i].tail
	}
	return ServerSpan(old.Servers, cur)
}

// sameList reports that a and b are the same slice (not equal copies).
func sameList(a, b []*Server) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
