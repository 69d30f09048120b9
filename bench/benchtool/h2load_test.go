package main

import "testing"

func TestParseH2loadResultReadsTheSummary(t *testing.T) {
	out := `starting benchmark...
spawning thread #0: 100 total client(s). 1000000 total requests
Application protocol: h2c

finished in 3.00s, 11771.33 req/s, 735.70KB/s
requests: 35314 total, 35414 started, 35314 done, 35300 succeeded, 14 failed, 4 errored, 2 timeout
status codes: 35300 2xx, 0 3xx, 3 4xx, 5 5xx
traffic: 2.16MB (2260096) total, 103.45KB (105930) headers (space savings 94.38%), 2.15MB (2259200) data
                     min         max         mean         sd        +/- sd
time for request:      445us     12.24ms      3.15ms      4.72ms    80.00%
`
	if !isH2load(out) {
		t.Fatal("isH2load: false")
	}
	var r Run
	if err := parseH2loadResult(out, &r); err != nil {
		t.Fatal(err)
	}
	want := Errors{Connect: 4, Read: 8, Timeout: 2, Status: 8}
	if r.Requests != 35300 || r.Bytes != 2259200 || r.Seconds != 3 || r.Errors != want {
		t.Fatalf("got requests %d bytes %d seconds %v errors %+v", r.Requests, r.Bytes, r.Seconds, r.Errors)
	}
	var ms Run
	if err := parseH2loadResult("finished in 884us, 0.00 req/s, 375.60KB/s\nrequests: 2 total, 1 started, 0 done, 0 succeeded, 2 failed, 2 errored, 0 timeout\nstatus codes: 0 2xx, 0 3xx, 0 4xx, 0 5xx\ntraffic: 340B (340) total, 0B (0) headers (space savings 0.00%), 0B (0) data\n", &ms); err != nil {
		t.Fatal(err)
	}
	if ms.Seconds != 884e-6 || ms.Requests != 0 || ms.Errors.Connect != 2 {
		t.Fatalf("got %+v", ms)
	}
	if validate(&ms) == "" {
		t.Fatal("a run with no request is valid")
	}
	if isH2load("BENCHRESULT requests=1 bytes=1 duration_us=1") {
		t.Fatal("wrk's line taken for h2load's")
	}
}
