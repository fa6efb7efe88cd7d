//go:build !race

package localtargets

const raceDetector = false
