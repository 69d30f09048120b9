// Package faults is the fault suite of spliced: tests that start the real
// binary (built once per run, with -race when the tests run with it),
// configure it only through the admin API, put Go servers or raw TCP
// listeners on 127.0.0.1 behind it and inflict one fault each:
//
//   - servers that reset mid-body (tcp and http), accept and never
//     answer, answer early and close, send malformed or oversized
//     response heads, or close pooled keep-alive connections at random;
//   - clients that send their headers slowly or never read a large
//     response;
//   - fd exhaustion (the binary run with a low RLIMIT_NOFILE);
//   - every runtime change of the API under a running load;
//   - SIGTERM with idle, in-flight and long tcp connections.
//
// hostile_test.go then uses the fixes of issue 12 the way an attacker or a
// careless operator would: smuggling through an early answer, pipelining
// across changes, floods, storms of concurrent writes, nbthread flapping,
// servers that die, churn, or send unrequested responses, scarce pipes.
//
// Every case checks three things: the process is still alive (and its log
// shows no race and no panic: the binary is built with -race when the
// tests are), the admin API still answers (and no gauge of its stats is
// below zero), and the client got the documented result (a status, or a
// clean close) with nothing wrong forwarded. Timeouts are set short
// through the API so that each case is bounded in time; the whole package
// runs in `make test` (scripts/test.sh runs go test -race ./...).
//
// What a client sees on each fault is the table "What a client sees on
// faults" in the README.
package faults
