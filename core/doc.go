// Package core is the contract between the admin API and the data plane:
// the Control interface (with its Placement part), the Runtime and
// ThreadState values it reports, and its errors (ErrStopping). The API
// imports this package and never the data plane (core/engine and the
// packages under it), so the API can be tested against a fake core
// (core/coretest) and the data plane without HTTP. cmd/spliced wires the
// real one (engine.New). It also holds KTLSSupport (ktls.go), a stateless
// probe of the host kernel's TCP ULP list that the API reports in
// /api/v1/info; spliced has no kTLS transport yet.
package core
