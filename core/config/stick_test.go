package config

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestLimitDefaults(t *testing.T) {
	f := Frontend{Name: "f", Mode: ModeHTTP, Limits: []Limit{
		{Name: "a", ReqRate: &LimitRate{Count: 10, PeriodMs: 1000}},
		{Name: "b", Action: LimitTarpit, ReqRate: &LimitRate{Count: 10, PeriodMs: 600000}},
	}}
	f.Normalize()
	a, b := f.Limits[0], f.Limits[1]
	if a.Key != LimitKeySrc || a.Action != LimitDeny || a.Track != LimitTrackAlways || a.Scope != LimitScopeNode ||
		a.MaxEntries != DefaultLimitMaxEntries || a.ExpireMs != DefaultLimitExpireMs || a.TarpitMs != 0 {
		t.Errorf("defaults of a: %+v", a)
	}
	if b.TarpitMs != DefaultLimitTarpitMs || b.ExpireMs != 1200000 {
		t.Errorf("tarpit_ms and expire_ms of b: %+v (expire: twice the longest period)", b)
	}
	// Clone is deep.
	c := (&Config{Frontends: []Frontend{f}}).Clone()
	c.Frontends[0].Limits[0].ReqRate.Count = 99
	if f.Limits[0].ReqRate.Count != 10 {
		t.Error("Clone shares a limit's rate")
	}
}

func TestValidateLimits(t *testing.T) {
	rate := func(n, p int) *LimitRate { return &LimitRate{Count: n, PeriodMs: p} }
	tests := []struct {
		name   string
		mutate func(f *Frontend, tcp *Frontend)
		want   []want
	}{
		{name: "good limits pass", mutate: func(f, tcp *Frontend) {
			f.Limits = []Limit{
				{Name: "per_ip", ConnCur: 10, ConnRate: rate(20, 1000), ReqRate: rate(100, 10000), ErrRate: rate(10, 10000)},
				{Name: "api-key", Key: "header:X-Api-Key", ReqRate: rate(5, 1000), Action: "tarpit", Track: "rules", Scope: "cluster"},
			}
			tcp.Limits = []Limit{{Name: "conns", ConnCur: 5}}
		}},
		{name: "no threshold", mutate: func(f, _ *Frontend) { f.Limits = []Limit{{Name: "x"}} },
			want: []want{{"/frontends/0/limits/0", CodeRequired}}},
		{name: "bad name and duplicate", mutate: func(f, _ *Frontend) {
			f.Limits = []Limit{{Name: "A b", ConnCur: 1}, {Name: "x", ConnCur: 1}, {Name: "x", ConnCur: 1}}
		}, want: []want{{"/frontends/0/limits/0/name", CodeFormat}, {"/frontends/0/limits/2/name", CodeDuplicate}}},
		{name: "bad keys", mutate: func(f, _ *Frontend) {
			f.Limits = []Limit{{Name: "a", Key: "dst", ReqRate: rate(1, 1000)}, {Name: "b", Key: "header:", ReqRate: rate(1, 1000)},
				{Name: "c", Key: "header:X Y", ReqRate: rate(1, 1000)}, {Name: "d", Key: "tls_client_cert", ReqRate: rate(1, 1000)}}
		}, want: []want{{"/frontends/0/limits/0/key", CodeOneOf}, {"/frontends/0/limits/1/key", CodeFormat},
			{"/frontends/0/limits/2/key", CodeFormat}, {"/frontends/0/limits/3/key", CodeModeMismatch}}},
		{name: "connections need key src and track always", mutate: func(f, _ *Frontend) {
			f.Limits = []Limit{{Name: "a", Key: "header:X-K", ConnCur: 3}, {Name: "b", Track: "rules", ConnRate: rate(1, 1000)}}
		}, want: []want{{"/frontends/0/limits/0/conn_cur", CodeModeMismatch}, {"/frontends/0/limits/1/conn_rate", CodeModeMismatch}}},
		{name: "tcp frontends count connections only", mutate: func(_, tcp *Frontend) {
			tcp.Limits = []Limit{{Name: "a", ReqRate: rate(1, 1000), ErrRate: rate(1, 1000), Track: "rules", Action: "tarpit", Key: "header:X"}}
		}, want: []want{{"/frontends/1/limits/0/action", CodeModeMismatch}, {"/frontends/1/limits/0/err_rate", CodeModeMismatch},
			{"/frontends/1/limits/0/key", CodeModeMismatch}, {"/frontends/1/limits/0/req_rate", CodeModeMismatch},
			{"/frontends/1/limits/0/track", CodeModeMismatch}}},
		{name: "bounds", mutate: func(f, _ *Frontend) {
			f.Limits = []Limit{{Name: "a", ConnCur: -1, ReqRate: rate(0, 50), ErrRate: rate(2000000, 100000000),
				Action: "drop", Track: "never", Scope: "world", MaxEntries: 4, ExpireMs: 10, TarpitMs: 70000}}
		}, want: []want{
			{"/frontends/0/limits/0/action", CodeOneOf}, {"/frontends/0/limits/0/conn_cur", CodeOutOfRange},
			{"/frontends/0/limits/0/err_rate/count", CodeOutOfRange}, {"/frontends/0/limits/0/err_rate/period_ms", CodeOutOfRange},
			{"/frontends/0/limits/0/expire_ms", CodeOutOfRange}, {"/frontends/0/limits/0/max_entries", CodeOutOfRange},
			{"/frontends/0/limits/0/req_rate/count", CodeOutOfRange}, {"/frontends/0/limits/0/req_rate/period_ms", CodeOutOfRange},
			{"/frontends/0/limits/0/scope", CodeOneOf}, {"/frontends/0/limits/0/tarpit_ms", CodeOutOfRange},
			{"/frontends/0/limits/0/track", CodeOneOf}}},
		{name: "expire shorter than a period", mutate: func(f, _ *Frontend) {
			f.Limits = []Limit{{Name: "a", ReqRate: rate(1, 120000), ExpireMs: 60000}}
		}, want: []want{{"/frontends/0/limits/0/expire_ms", CodeOutOfRange}}},
		{name: "too many limits", mutate: func(f, _ *Frontend) {
			for i := 0; i <= MaxLimitsPerFrontend; i++ {
				f.Limits = append(f.Limits, Limit{Name: "l" + strings.Repeat("x", i), ConnCur: 1})
			}
		}, want: []want{{"/frontends/0/limits", CodeOutOfRange}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := goodConfig()
			tt.mutate(&c.Frontends[0], &c.Frontends[1])
			c.Normalize()
			got := fieldErrors(t, Validate(c, Env{}))
			slices.SortFunc(got, func(a, b want) int { return strings.Compare(a.field, b.field) })
			if !slices.Equal(got, tt.want) {
				t.Fatalf("problems\n got: %v\nwant: %v", got, tt.want)
			}
		})
	}
}

// A frontend without limits stores none: documents written before limits
// existed read and write back the same.
func TestLimitsOmittedWhenNone(t *testing.T) {
	f := Frontend{Name: "f"}
	f.Normalize()
	b, _ := json.Marshal(f)
	if strings.Contains(string(b), "limits") {
		t.Errorf("%s", b)
	}
}
