package accesslog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"

	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Tee writes each line to every sink in turn: a sink that fails (a full
// disk, an unreachable syslog) loses that line and does not keep it from
// the others, where io.MultiWriter would stop at the first error.
type Tee []io.Writer

// Write writes p to every sink; the error joins those of the sinks that
// failed.
func (t Tee) Write(p []byte) (int, error) {
	var errs []error
	for _, w := range t {
		if _, err := w.Write(p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return 0, errors.Join(errs...)
	}
	return len(p), nil
}

// File is an access-log file that can be reopened (logrotate: after
// SIGHUP, or by itself when it finds the path renamed or removed). Each
// Write is one line.
type File struct {
	path string

	mu      sync.Mutex
	f       *os.File
	checked time.Time // last look at the path (rotation)
}

// rotateCheckEvery bounds how often a Write looks whether the file was
// rotated (one stat).
const rotateCheckEvery = time.Second

// OpenFile opens path for appending (created 0640).
func OpenFile(path string) (*File, error) {
	f := &File{path: path}
	if err := f.Reopen(); err != nil {
		return nil, err
	}
	return f, nil
}

// Reopen closes the file and opens path again (after a rotation).
func (f *File) Reopen() error {
	nf, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o640)
	if err != nil {
		return fmt.Errorf("access log file: %w", err)
	}
	f.mu.Lock()
	old := f.f
	f.f = nf
	f.checked = time.Now()
	f.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

// Write appends p; at most once a second it first checks that the path
// still names the open file, and reopens it when not (rotated away).
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	rotated := false
	if now := time.Now(); now.Sub(f.checked) >= rotateCheckEvery {
		f.checked = now
		cur, err1 := f.f.Stat()
		st, err2 := os.Stat(f.path)
		rotated = err1 == nil && (err2 != nil || !os.SameFile(cur, st))
	}
	f.mu.Unlock()
	if rotated {
		_ = f.Reopen() // on failure, keep writing to the old file
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.f.Write(p)
}

// Close closes the file.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.f.Close()
}

// Syslog sends each Write (one line) as one datagram to a syslog server,
// facility local0, severity info, tag "spliced", in RFC 3164 or RFC 5424
// format.
type Syslog struct {
	network, addr string
	rfc5424       bool
	host          string

	mu sync.Mutex
	c  net.Conn
}

// DialSyslog parses target — udp://host:port, unix:///dev/log or
// unix:/dev/log (a datagram socket) — and connects to it. format is
// "rfc3164" (the default, what HAProxy sends) or "rfc5424".
func DialSyslog(target, format string) (*Syslog, error) {
	s := &Syslog{}
	switch format {
	case "", "rfc3164":
	case "rfc5424":
		s.rfc5424 = true
	default:
		return nil, fmt.Errorf("access log syslog format must be rfc3164 or rfc5424, not %q", format)
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("access log syslog address %q: %w", target, err)
	}
	switch u.Scheme {
	case "udp":
		if u.Port() == "" {
			u.Host += ":514"
		}
		s.network, s.addr = "udp", u.Host
	case "unix":
		s.network, s.addr = "unixgram", u.Path
		if s.addr == "" {
			s.addr = u.Opaque
		}
	default:
		return nil, fmt.Errorf("access log syslog address %q: want udp://host:port or unix:/path", target)
	}
	if s.addr == "" {
		return nil, fmt.Errorf("access log syslog address %q: no host or path", target)
	}
	s.host, _ = os.Hostname()
	if s.host == "" {
		s.host = "-"
	}
	if err := s.dial(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Syslog) dial() error {
	c, err := net.Dial(s.network, s.addr)
	if err != nil {
		return fmt.Errorf("access log syslog: %w", err)
	}
	s.c = c
	return nil
}

// pri is facility local0 (16), severity info (6).
const pri = "<134>"

// Write sends line p (its newline dropped) as one message. A send that
// fails is tried once more on a new socket (syslogd restarted); a message
// that cannot be sent, or that a daemon's full queue has no room for, is
// lost, as with any syslog over a datagram: Write never waits.
func (s *Syslog) Write(p []byte) (int, error) {
	msg := bytes.TrimRight(p, "\n")
	var b bytes.Buffer
	now := time.Now()
	if s.rfc5424 {
		b.WriteString(pri + "1 " + now.UTC().Format("2006-01-02T15:04:05.000000Z") + " " + s.host + " spliced " +
			strconv.Itoa(os.Getpid()) + " access - ")
	} else {
		b.WriteString(pri + now.Format(time.Stamp) + " ")
		if s.network != "unixgram" { // the local daemon adds the host itself
			b.WriteString(s.host + " ")
		}
		b.WriteString("spliced[" + strconv.Itoa(os.Getpid()) + "]: ")
	}
	b.Write(msg)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		err := s.send(b.Bytes())
		if err == nil {
			return len(p), nil
		}
		if errors.Is(err, unix.EAGAIN) { // the daemon's queue is full: the socket is fine
			return 0, fmt.Errorf("access log syslog: %w", err)
		}
		s.c.Close()
		s.c = nil
	}
	if err := s.dial(); err != nil {
		return 0, err
	}
	if err := s.send(b.Bytes()); err != nil {
		return 0, fmt.Errorf("access log syslog: %w", err)
	}
	return len(p), nil
}

// send sends one datagram without waiting: a local daemon that does not
// read fills its socket's queue, and a blocking send would stall the
// access-log writer (and the stop that waits for it) for as long; the
// message is lost instead (EAGAIN), as any datagram may be.
func (s *Syslog) send(msg []byte) error {
	rc, err := s.c.(syscall.Conn).SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		for {
			_, werr = unix.Write(int(fd), msg)
			if werr != unix.EINTR {
				return true // done, or failed: never wait for room
			}
		}
	}); err != nil {
		return err
	}
	return werr
}

// Close closes the socket.
func (s *Syslog) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		return nil
	}
	return s.c.Close()
}
