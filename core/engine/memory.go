package engine

import (
	"context"
	"sync"

	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/proxy"
	"github.com/spliced-proxy/spliced/core/stats"
)

// Memory reports the process's memory and what each loop's data plane
// holds (any goroutine): each loop counts its own objects on its thread
// (one Exec, within a round), so the figures are what is live, not an
// estimate. Bounded by ctx and liveLoopsWait; a loop that did not answer
// in time is left out.
func (e *Engine) Memory(ctx context.Context) (stats.Memory, error) {
	classes := stats.SizeClasses()
	m := stats.Memory{Loops: []stats.LoopMemory{}, IdleHTTPConn: proxy.IdleHTTPConn(classes)}
	for _, p := range m.IdleHTTPConn {
		m.IdleHTTPConnBytes += p.Bytes
	}
	if v := e.view.Load(); v != nil {
		out := make([]stats.LoopMemory, len(v.loops))
		ok := make([]bool, len(v.loops))
		var wg sync.WaitGroup
		for i, l := range v.loops {
			w := v.workers[i]
			wg.Add(1)
			if !l.Exec(func(l *loop.Loop) {
				out[i] = stats.LoopMemory{Loop: l.ID(), Objects: w.Memory(classes)}
				ok[i] = true
				wg.Done()
			}) {
				wg.Done()
			}
		}
		wctx, cancel := context.WithTimeout(ctx, liveLoopsWait)
		defer cancel()
		if err := waitGroup(wctx, &wg); err != nil {
			return stats.Memory{}, err
		}
		for i := range out {
			if !ok[i] {
				continue
			}
			for _, p := range out[i].Objects {
				out[i].Bytes += p.Bytes
			}
			m.Loops = append(m.Loops, out[i])
		}
	}
	m.Go = stats.ReadGoMemory()
	m.RSSBytes = stats.ReadRSS()
	return m, nil
}
