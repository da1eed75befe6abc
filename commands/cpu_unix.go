//go:build unix

package commands

import (
	"strconv"
	"syscall"
)

// cpuFields is INFO cpu: the process' CPU time, from getrusage.
func cpuFields() [][2]string {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	secs := func(t syscall.Timeval) string {
		return strconv.FormatFloat(float64(t.Sec)+float64(t.Usec)/1e6, 'f', 6, 64)
	}
	return [][2]string{
		{"used_cpu_sys", secs(self.Stime)},
		{"used_cpu_user", secs(self.Utime)},
		{"used_cpu_sys_children", secs(children.Stime)},
		{"used_cpu_user_children", secs(children.Utime)},
	}
}
