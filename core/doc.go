// Package core is the appliance behind the admin API. The API reaches it only
// through the Control interface, so the API can be tested against a fake core
// and the core without HTTP.
package core
