package engine

import (
	"fmt"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/proxy"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/core/stick"
)

// limitRT is a limit's state across generations: its table and counters
// stay while the limit keeps its name, key and max_entries (a client's
// counts survive any other change of the frontend or of the limit's
// thresholds); a new key or size starts an empty table, the counters
// stay.
type limitRT struct {
	table *stick.Table
	stats *proxy.LimitCounters
	key   string
	max   int
}

// frontLimits compiles the limits of cf for this generation, reusing the
// tables f holds (Apply, e.mu held).
func (e *Engine) frontLimits(f *feRT, cf *config.Frontend) *proxy.LimitSet {
	if len(cf.Limits) == 0 {
		f.limits, f.limitSet = nil, nil
		return nil
	}
	next := make(map[string]*limitRT, len(cf.Limits))
	list := make([]*proxy.Limit, 0, len(cf.Limits))
	for i := range cf.Limits {
		cl := &cf.Limits[i]
		rt := f.limits[cl.Name]
		switch {
		case rt == nil:
			rt = &limitRT{table: proxy.NewLimitTable(cl), stats: proxy.NewLimitCounters(len(e.loops)), key: cl.Key, max: cl.MaxEntries}
		case rt.key != cl.Key || rt.max != cl.MaxEntries:
			rt = &limitRT{table: proxy.NewLimitTable(cl), stats: rt.stats, key: cl.Key, max: cl.MaxEntries}
		default:
			rt.table.SetExpire(int64(cl.ExpireMs) * 1e6)
		}
		next[cl.Name] = rt
		list = append(list, proxy.CompileLimit(cl, rt.table, rt.stats, &e.liveNodes))
	}
	f.limits = next
	f.limitSet = proxy.NewLimitSet(list)
	return f.limitSet
}

// SetLiveNodes tells the data plane how many nodes of its cluster are
// live (at least 1): the limits with scope cluster divide their
// thresholds by it. A single node never calls it. Any goroutine.
func (e *Engine) SetLiveNodes(n int) { e.liveNodes.Store(int32(max(n, 1))) }

// findLimit is the running generation's limit name of frontend fe.
func (e *Engine) findLimit(fe, name string) (*proxy.Limit, string, error) {
	if v := e.view.Load(); v != nil {
		for _, f := range v.fronts {
			if f.name != fe {
				continue
			}
			if f.limits != nil {
				if i := f.limits.set.Index(name); i >= 0 {
					return f.limits.set.List[i], f.limits.keys[i], nil
				}
			}
			return nil, "", fmt.Errorf("%w: frontend %q has no limit %q", config.ErrNotFound, fe, name)
		}
	}
	return nil, "", fmt.Errorf("%w: no frontend %q", config.ErrNotFound, fe)
}

// LimitEntries implements core.LimitTables.
func (e *Engine) LimitEntries(fe, name string, n int) (core.LimitTable, error) {
	l, key, err := e.findLimit(fe, name)
	if err != nil {
		return core.LimitTable{}, err
	}
	now := loop.Mono()
	top, live := l.Table.Top(n, now, l.Periods())
	st := l.Table.Stats()
	out := core.LimitTable{Frontend: fe, Limit: name, Key: key, Entries: live, Capacity: st.Capacity,
		Untracked: st.Full + st.Busy, Nodes: 1, Top: make([]core.LimitEntry, 0, len(top))}
	if l.Nodes != nil {
		out.Nodes = int(max(l.Nodes.Load(), 1))
	}
	for i := range top {
		v := &top[i]
		out.Top = append(out.Top, core.LimitEntry{Key: v.Key.String(), ConnCur: int(v.ConnCur),
			ConnRate: v.ConnRate, ReqRate: v.ReqRate, ErrRate: v.ErrRate, IdleMs: v.IdleNs / 1e6})
	}
	return out, nil
}

// ClearLimitEntry implements core.LimitTables.
func (e *Engine) ClearLimitEntry(fe, name, key string, dry bool) error {
	l, _, err := e.findLimit(fe, name)
	if err != nil {
		return err
	}
	k, err := stick.ParseKey(l.KeyKind(), key)
	if err != nil {
		return fmt.Errorf("%w: %q is not a key of limit %q (%s)", config.ErrInvalid, key, name, keyHint(l.KeyKind()))
	}
	if dry {
		if !l.Table.Find(&k).Valid() {
			return fmt.Errorf("%w: limit %q holds no entry %q", config.ErrNotFound, name, key)
		}
		return nil
	}
	if !l.Table.Clear(&k) {
		return fmt.Errorf("%w: limit %q holds no entry %q", config.ErrNotFound, name, key)
	}
	return nil
}

func keyHint(k stick.Kind) string {
	switch k {
	case stick.KindCert:
		return `"sha256:" and 64 hex digits`
	case stick.KindBytes:
		return "the header's value, or \"sha256:\" and 64 hex digits for one longer than 64 bytes"
	}
	return "an IP address"
}

// limitsView is what Stats and the entries endpoint read of a frontend's
// limits: the running generation's, with each limit's key as configured.
type limitsView struct {
	set  *proxy.LimitSet
	keys []string
}

func newLimitsView(f *feRT, cf *config.Frontend) *limitsView {
	if f.limitSet == nil {
		return nil
	}
	v := &limitsView{set: f.limitSet}
	for i := range cf.Limits {
		v.keys = append(v.keys, cf.Limits[i].Key)
	}
	return v
}

// counts are the limits' counters for Stats (nil without limits).
func (v *limitsView) counts() []stats.LimitCounts {
	if v == nil {
		return nil
	}
	out := make([]stats.LimitCounts, 0, len(v.set.List))
	for _, l := range v.set.List {
		t, ts := l.Stats.Total(), l.Table.Stats()
		out = append(out, stats.LimitCounts{Name: l.Name, Denied: t.Denied, Tarpitted: t.Tarpitted, Refused: t.Refused,
			Entries: ts.Used, Capacity: ts.Capacity})
	}
	return out
}
