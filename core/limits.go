package core

// LimitTables is the part of Control that reads and clears the entries of
// the per-client limits (stick tables) the data plane runs: GET and DELETE
// /api/v1/frontends/{name}/limits/{limit}/entries. It reads the tables
// without stopping the loops (each entry consistent, the whole not a
// snapshot). An unknown frontend or limit is an error wrapping
// config.ErrNotFound; a key that cannot be one of the limit's, one
// wrapping config.ErrInvalid.
type LimitTables interface {
	// LimitEntries returns the n entries of the limit with the highest
	// counters (requests, then current connections, then new connections,
	// then errors).
	LimitEntries(frontend, limit string, n int) (LimitTable, error)
	// ClearLimitEntry forgets one client of the limit (key as
	// LimitEntry.Key shows it): its rates restart from zero; an entry
	// that holds connections keeps counting them. config.ErrNotFound
	// when the table does not hold the key. dry: only check that it
	// does.
	ClearLimitEntry(frontend, limit, key string, dry bool) error
}

// LimitTable is a limit's table as the entries endpoint shows it.
type LimitTable struct {
	Frontend string `json:"frontend" example:"public"`
	Limit    string `json:"limit" example:"per_ip"`
	Key      string `json:"key" example:"src"`
	// Entries is the number of clients tracked now (expired ones left
	// out); Capacity the most the table holds (max_entries rounded down
	// to a multiple of 8).
	Entries  int `json:"entries" example:"1200"`
	Capacity int `json:"capacity" example:"100000"`
	// Untracked counts new clients the table could not take: every entry
	// of their set held connections, or another loop was writing it.
	Untracked uint64 `json:"untracked" example:"0"`
	// Thresholds as this node enforces them (scope cluster: divided by
	// the live nodes, Nodes).
	Nodes int          `json:"nodes" example:"1"`
	Top   []LimitEntry `json:"top"`
}

// LimitEntry is one client of a limit's table: its current connections
// and its rates over the limit's periods (0 for a rate the limit does not
// set).
type LimitEntry struct {
	// Key is the client: an IP address (key src), the header's value (a
	// value longer than 64 bytes: "sha256:" and its hash), or "sha256:"
	// and the certificate's hash (tls_client_cert). DELETE takes it back,
	// percent-encoded.
	Key      string `json:"key" example:"192.0.2.7"`
	ConnCur  int    `json:"conn_cur" example:"2"`
	ConnRate uint64 `json:"conn_rate" example:"5"`
	ReqRate  uint64 `json:"req_rate" example:"120"`
	ErrRate  uint64 `json:"err_rate" example:"0"`
	// IdleMs is how long since the client was last seen.
	IdleMs int64 `json:"idle_ms" example:"250"`
}
