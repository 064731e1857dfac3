package k8s

import "syscall"

// childProcAttr makes the kernel kill a replica if the test binary dies without stopping it.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
