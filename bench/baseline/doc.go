// Command baseline is the reference TCP proxy of `make bench`: the simplest
// proxy a Go programmer would write, one goroutine per direction of each
// connection and io.Copy between them. Between two *net.TCPConn, io.Copy
// uses splice(2) through a 1 MiB pipe, so it is also a zero-copy proxy.
// spliced's event loops must beat it on every bench row, or they do not
// justify their complexity (issue 3).
//
// It is a bench tool, not part of the appliance: no timeouts beyond connect,
// no limits, no logging per connection.
package main
