// Package testkit holds what the tests of every package share and nothing
// else: the one DNSEndpoint renderer, the one way to wait for a condition,
// whether the race detector is on, and how a test stops when a part it
// needs is missing. It imports only the standard library,
// so that plugin unit tests can use it without pulling in the e2e harness
// (test/harness, which builds on it and on client-go).
package testkit
