//go:build !unix

package stages

// NotWritable says why files cannot be made in a directory: here, never
// known ahead ("").
func NotWritable(string) string { return "" }
