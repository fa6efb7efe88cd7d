//go:build !race

package testkit

// Race is true when the race detector is on: it slows code down by 2-20x,
// so tests check what they answer under it, not how fast (DESIGN.md keeps
// latency bounds out of -race).
const Race = false
