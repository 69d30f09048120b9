package stats

// LimitCounts are what one per-client limit of a frontend did since it was
// created (its counters survive configuration changes while the limit
// keeps its name): requests denied at once (429), requests tarpitted
// (then 429), connections refused at accept; and its table's occupancy on
// this node.
type LimitCounts struct {
	Name      string `json:"name" example:"per_ip"`
	Denied    int64  `json:"denied" example:"12"`
	Tarpitted int64  `json:"tarpitted" example:"0"`
	Refused   int64  `json:"conns_refused" example:"3"`
	// Entries are the clients the table holds (expired ones until
	// reused), Capacity the most it holds.
	Entries  int64 `json:"entries" example:"1200"`
	Capacity int   `json:"capacity" example:"100000"`
}
