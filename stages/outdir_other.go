//go:build unix && !linux

package stages

func virtualFS(string) string { return "" }
