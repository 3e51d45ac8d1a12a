//go:build !unix

package stages

func notWritable(string) string { return "" }
