package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/spliced-proxy/spliced/core/accesslog"
	"github.com/spliced-proxy/spliced/core/loop"
)

// accessLogFlags are the --access-log-* flags: where the access-log lines
// of frontends with "access_log": true go, and in which format.
type accessLogFlags struct {
	format, file, syslog, syslogFormat *string
	keepAbnormal                       *int
}

func addAccessLogFlags(fs *flag.FlagSet) accessLogFlags {
	return accessLogFlags{
		format:       fs.String("access-log-format", "", "access log format: text or json (default: that of --log-format)"),
		file:         fs.String("access-log-file", "", "write the access log to this file instead of stderr (reopened on SIGHUP, and when rotated away)"),
		syslog:       fs.String("access-log-syslog", "", "send the access log to syslog instead of stderr: udp://host:port or unix:/dev/log (one datagram per line, facility local0)"),
		syslogFormat: fs.String("access-log-syslog-format", "rfc3164", "syslog message format of --access-log-syslog: rfc3164 or rfc5424"),
		keepAbnormal: fs.Int("access-log-keep-abnormal", accesslog.KeepAbnormalDefault,
			fmt.Sprintf("abnormal access-log entries (status >= 400, or a termination other than --) GET /api/v1/logs keeps beside the last %d entries, of each side: that many of the server side's faults (5xx; ended by the server or the proxy) and as many of the client side's (4xx; ended by the client), so that bad requests cannot push a 502 out (1..%d)", accesslog.KeepDefault, accesslog.KeepAbnormalMax)),
	}
}

// accessLogSink is the access log built from the flags: the Log the
// engine writes and the API reads, reopen (SIGHUP) and close.
type accessLogSink struct {
	log    *accesslog.Log
	reopen func() error
	close  func()
}

// openAccessLog builds the access log: lines in format (text or json;
// "" or auto: logFormat's choice for stderr) to the file and/or syslog
// named, else to stderr.
func openAccessLog(f accessLogFlags, logFormat string, stderr io.Writer) (*accessLogSink, error) {
	format := *f.format
	if format == "" || format == "auto" {
		format = logFormat
		if format == "auto" {
			format = "json"
			if isTerminal(stderr) && *f.file == "" && *f.syslog == "" {
				format = "text"
			}
		}
	}
	if format != "text" && format != "json" {
		return nil, fmt.Errorf("--access-log-format must be text or json, not %q", format)
	}
	if *f.keepAbnormal < 1 || *f.keepAbnormal > accesslog.KeepAbnormalMax {
		return nil, fmt.Errorf("--access-log-keep-abnormal must be between 1 and %d, not %d", accesslog.KeepAbnormalMax, *f.keepAbnormal)
	}
	sink := &accessLogSink{reopen: func() error { return nil }, close: func() {}}
	var outs []io.Writer
	var closers []io.Closer
	if *f.file != "" {
		file, err := accesslog.OpenFile(*f.file)
		if err != nil {
			return nil, err
		}
		outs, closers = append(outs, file), append(closers, file)
		sink.reopen = file.Reopen
	}
	if *f.syslog != "" {
		s, err := accesslog.DialSyslog(*f.syslog, *f.syslogFormat)
		if err != nil {
			for _, c := range closers {
				c.Close()
			}
			return nil, err
		}
		outs, closers = append(outs, s), append(closers, s)
	}
	if len(outs) == 0 {
		outs = append(outs, stderr)
	}
	sink.close = func() {
		for _, c := range closers {
			c.Close()
		}
	}
	w := accesslog.Tee(outs) // one Write per line to each sink (one datagram per line), a failing one skipped
	var h slog.Handler = slog.NewJSONHandler(w, nil)
	if format == "text" {
		h = slog.NewTextHandler(w, nil)
	}
	sink.log = accesslog.New(slog.New(h), 0, *f.keepAbnormal, loop.Mono)
	return sink, nil
}
