//go:build !race

package stages

const raceDetector = false
