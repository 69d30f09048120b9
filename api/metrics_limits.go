package api

// The families of the per-client limits (stick tables): present once a
// frontend has a limit.
func limitFamilies() []mfamily {
	const limited, entries = "spliced_frontend_limited_total", "spliced_frontend_limit_entries"
	return []mfamily{
		{limited, "Requests and connections refused by a per-client limit of the frontend, by limit and action: deny (429 at once), tarpit (held tarpit_ms, then 429), conn_refused (closed at accept, over conn_cur or conn_rate).", "counter", func(e *expo, v *mview) {
			for i := range v.fe {
				o := &v.fe[i]
				for _, l := range o.fe.Limits {
					e.sample(limited, "", float64(l.Refused), "action", "conn_refused", "frontend", o.lv[0], "limit", l.Name)
					e.sample(limited, "", float64(l.Denied), "action", "deny", "frontend", o.lv[0], "limit", l.Name)
					e.sample(limited, "", float64(l.Tarpitted), "action", "tarpit", "frontend", o.lv[0], "limit", l.Name)
				}
			}
		}},
		{entries, "Clients the per-client limit's table holds on this node (at most its capacity, max_entries rounded down to a multiple of 8).", "gauge", func(e *expo, v *mview) {
			for i := range v.fe {
				o := &v.fe[i]
				for _, l := range o.fe.Limits {
					e.sample(entries, "", float64(l.Entries), "frontend", o.lv[0], "limit", l.Name)
				}
			}
		}},
	}
}
