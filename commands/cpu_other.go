//go:build !unix

package commands

// cpuFields is INFO cpu where getrusage does not exist: the section is empty.
func cpuFields() [][2]string { return nil }
