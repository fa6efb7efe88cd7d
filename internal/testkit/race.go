//go:build race

package testkit

// Race is true when the race detector is on: it slows code down by 2-20x,
// so tests check what they answer under it, not how fast (latency bounds
// stay out of -race: docs/architecture.md, "Tests"). A test that bounds a
// latency reads Race in its own body: that is how `make timing` finds it
// (scripts/timingtests) to run it again without -race.
const Race = true
