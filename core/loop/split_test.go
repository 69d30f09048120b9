package loop

import "testing"

// The table is the specification of a round's budget. Each row is computed
// by hand in its comment: u = min(nU, ceil(depth*U/100)); left = depth-u;
// n = min(nN, ceil(left*N/(N+B))); left -= n; b = min(nB, left).
func TestSplitBudgetFlowsDownToNextClasses(t *testing.T) {
	def := Sched{Urgent: 33, Normal: 50, Bulk: 17}
	tests := []struct {
		name       string
		depth      int
		s          Sched
		nU, nN, nB int
		u, n, b    int
	}{
		// ceil(200*33/100)=66; left 134; ceil(134*50/67)=100; left 34 -> bulk 34.
		{"default shares, all queues long", 200, def, 1000, 1000, 1000, 66, 100, 34},
		// urgent empty: left 200; ceil(200*50/67)=ceil(149.25)=150; bulk 50.
		{"urgent empty flows to normal and bulk in their proportions", 200, def, 0, 1000, 1000, 0, 150, 50},
		// urgent uses 10 of 66: left 190; ceil(190*50/67)=ceil(141.79)=142; bulk 48.
		{"urgent short flows its unused budget down", 200, def, 10, 1000, 1000, 10, 142, 48},
		// 66; left 134; normal has 5; left 129 -> bulk 129.
		{"normal short gives its share to bulk", 200, def, 1000, 5, 1000, 66, 5, 129},
		// 66; normal 100; bulk has 3 -> 3; the 31 left are not given back up.
		{"bulk short leaves budget unused, nothing flows back up", 200, def, 1000, 1000, 3, 66, 100, 3},
		// normal empty: 66; left 134 all to bulk.
		{"normal empty gives all that is left to bulk", 200, def, 1000, 0, 1000, 66, 0, 134},
		// only urgent: ceil(66)=66 even with 1000 queued; the rest waits.
		{"only urgent is capped at its share", 200, def, 1000, 0, 0, 66, 0, 0},
		// only bulk: 0, 0 -> left 200 -> bulk 200.
		{"only bulk gets the whole depth", 200, def, 0, 0, 1000, 0, 0, 200},
		// ceil(1*33/100)=1; left 0.
		{"depth one goes to urgent", 1, def, 5, 5, 5, 1, 0, 0},
		// ceil(3*33/100)=ceil(0.99)=1; left 2; ceil(2*50/67)=ceil(1.49)=2; bulk 0.
		{"rounding up favours the earlier class", 3, def, 5, 5, 5, 1, 2, 0},
		// ceil(10*33/100)=4; left 6; ceil(6*50/67)=ceil(4.47)=5; bulk 1.
		{"small depth", 10, def, 9, 9, 9, 4, 5, 1},
		// 100/0/0: u = ceil(200)=200 capped by nU=50 -> 50; left 150, N+B=0 ->
		// halves: ceil(75)=75 normal; bulk 75.
		{"zero next shares split what is left in halves", 200, Sched{Urgent: 100}, 50, 1000, 1000, 50, 75, 75},
		// urgent share 0: urgent never runs; ceil(200*50/67)=150 normal; 50 bulk.
		{"urgent share zero starves urgent", 200, Sched{Normal: 50, Bulk: 17}, 10, 1000, 1000, 0, 150, 50},
		// 50/25/25, depth 100: 50; left 50; ceil(50*25/50)=25; 25.
		{"even shares", 100, Sched{Urgent: 50, Normal: 25, Bulk: 25}, 100, 100, 100, 50, 25, 25},
		{"nothing queued", 200, def, 0, 0, 0, 0, 0, 0},
		{"zero depth runs nothing", 0, def, 5, 5, 5, 0, 0, 0},
		{"negative queue lengths count as empty", 200, def, -1, -1, 7, 0, 0, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, n, b := Split(tt.depth, tt.s, tt.nU, tt.nN, tt.nB)
			if u != tt.u || n != tt.n || b != tt.b {
				t.Fatalf("Split(%d, %+v, %d, %d, %d) = %d/%d/%d, want %d/%d/%d",
					tt.depth, tt.s, tt.nU, tt.nN, tt.nB, u, n, b, tt.u, tt.n, tt.b)
			}
			if u+n+b > tt.depth {
				t.Fatalf("budget exceeded: %d > %d", u+n+b, tt.depth)
			}
		})
	}
}
