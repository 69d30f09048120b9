package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSeed001TableMediansRatiosToP2CAndSpread(t *testing.T) {
	if got := imbalance([]int{4, 2}, 6); got != 4.0*2/6 {
		t.Fatalf("imbalance 4/2: %v", got)
	}
	if got := spreadString([]int{3, 4, 4, 3}); got != "3/4/4/3" {
		t.Fatalf("spreadString: %q", got)
	}
	if _, err := intList("6,x"); err == nil {
		t.Fatal("intList accepted x")
	}
	res := []seedRun{
		{Loops: 2, Clients: 6, Dist: "p2c", Seconds: 2, ReqPerSec: 100, Spread: []int{4, 2}},
		{Loops: 2, Clients: 6, Dist: "p2c", Seconds: 4, ReqPerSec: 50, Spread: []int{5, 1}},
		{Loops: 2, Clients: 6, Dist: "p2c", Seconds: 3, ReqPerSec: 80, Spread: []int{3, 3}},
		{Loops: 2, Clients: 6, Dist: "p2c-rr", Seconds: 1.5, ReqPerSec: 120, Spread: []int{3, 3}},
		{Loops: 2, Clients: 6, Dist: "p2c-rr", Err: "boom"},
	}
	var b bytes.Buffer
	printSeed001(&b, res, []int{2}, []int{6}, []string{"p2c-rr", "p2c", "least-conn"}, 100, 10, 3)
	out := b.String()
	for _, want := range []string{
		"p2c-rr           1500    120       0.50×       1.50×      1.00  3/3 n/a",
		"p2c           3000     80       1.00×       1.00×      1.33  4/2 5/1 3/3",
		"least-conn            n/a",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestSchedTableSharesAndOldAgainstNew(t *testing.T) {
	if p := pctl([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 95); p != 10 {
		t.Fatalf("p95 of 1..10: %v", p)
	}
	if p := pctl([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 50); p != 5 {
		t.Fatalf("p50 of 1..10: %v", p)
	}
	scs := schedScenarios("x.lua", "benchtool")[:1]
	res := []schedRun{
		{scenario: "tcp-conn", shares: schedShares[0].name, tc: [3]float64{30, 50, 20}, avgLoopUs: 100, p50ms: 1, p95ms: 2, reqPerSec: 1000, cpuUsPerReq: 10},
		{scenario: "tcp-conn", shares: schedShares[1].name, tc: [3]float64{20, 30, 50}, avgLoopUs: 200, p50ms: 2, p95ms: 8, reqPerSec: 800, cpuUsPerReq: 12},
	}
	var b bytes.Buffer
	printSched(&b, scs, res, 1)
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"TCP conn rate 30/50/20 32/51/17 - 100 1.0/2.0 1000 0.0 10.00",
		"tcp-conn old 17/33/50 20/30/50 200 2.0/8.0 800",
		"tcp-conn new 33/50/17 30/50/20 100 1.0/2.0 1000 0.0 10.00 1.25× 0.25×",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
