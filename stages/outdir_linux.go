package stages

import "syscall"

// virtualFS says when dir is on a file system that takes no files.
func virtualFS(dir string) string {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return ""
	}
	const procMagic, sysfsMagic, stRdonly = 0x9fa0, 0x62656572, 1
	switch {
	case st.Type == procMagic || st.Type == sysfsMagic:
		return "is on a virtual file system (/proc, /sys) that takes no files"
	case st.Flags&stRdonly != 0:
		return "is on a read-only file system"
	}
	return ""
}
