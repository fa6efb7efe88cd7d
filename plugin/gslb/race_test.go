//go:build race

package gslb

// raceDetector is true under -race, whose slowdown makes time bounds
// meaningless: tests then check what happens, not how fast.
const raceDetector = true
