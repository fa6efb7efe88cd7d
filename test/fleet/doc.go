// Package fleet holds the end-to-end tests of the fleet protocol on the wire
// (plugin/gslb/fleet) against a stock secondary: Debian's Knot DNS follows a
// view with the fleet's TSIG key, by AXFR, then NOTIFY and IXFR, and serves
// the same records; kdig reads the view; unsigned and wrongly signed
// requests are refused.
package fleet
