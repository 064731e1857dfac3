//go:build !linux

package k8s

import "syscall"

// childProcAttr has nothing to add where the kernel cannot tie a child's life to its parent's.
func childProcAttr() *syscall.SysProcAttr {
	return nil
}
