//go:build !race

package gslb

const raceDetector = false
