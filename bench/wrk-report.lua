-- wrk calls done() once at the end of a run. Print wrk's exact counters on
-- one line for benchtool (wrk's own summary rounds bytes to "MB").
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCHRESULT requests=%d bytes=%d duration_us=%d connect=%d read=%d write=%d status=%d timeout=%d p50_us=%d p99_us=%d\n",
    summary.requests, summary.bytes, summary.duration,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
