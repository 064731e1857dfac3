//! Confines executor threads with a seccomp allow-list, so a bug in the runtime or in a host
//! function cannot open files, sockets or processes from the threads that run guest code.
//!
//! The list is what an executor needs to run calls: memory management for the instance pool and
//! the allocator (`mmap`, `mprotect`, `madvise`, ...), the `PAGEMAP_SCAN` ioctl that finds the
//! pages to reset (and no other ioctl request), futexes for the queue and the reply channels, signal return and alternate stacks
//! for wasmtime's trap handling, clocks, `getrandom` for hash seeds, writes to stdout and stderr
//! for logs, 8-byte writes (how a reply wakes the gateway's tokio reactor through its eventfd),
//! and thread exit. Anything else fails with `EPERM` rather than killing the process, so a missed
//! entry shows up as a failed call with a clear error, not as a crash of the node. What executors
//! would otherwise do lazily and cannot do here is done before: modules' copy-on-write memory
//! images (a memfd) are built at deploy, and WASI's Tokio runtime when the runtime starts.
//!
//! The filter is compiled once ([`ExecutorFilter::new`]) and installed by each executor thread
//! as it starts ([`ExecutorFilter::confine_this_thread`]): it applies to that thread only (no
//! `TSYNC`), would be inherited by threads it spawned (it spawns none: `clone` is not on the
//! list), and cannot be removed.

/// Installing the filter failed; the executor does not run unconfined without saying so.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot confine executor threads with seccomp: {0}; run `mote up --seccomp off` to run without it"
)]
pub struct ConfineError(String);

/// Syscalls an executor may make with any arguments.
#[cfg(target_os = "linux")]
const ALLOWED: &[libc::c_long] = &[
    // Memory: the instance pool, copy-on-write images, the allocator.
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_madvise,
    libc::SYS_mremap,
    libc::SYS_brk,
    // Queue, condvar, reply channels; spinning executors yield.
    libc::SYS_futex,
    libc::SYS_sched_yield,
    // wasmtime's trap handling and per-thread signal stacks.
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigprocmask,
    libc::SYS_sigaltstack,
    // Clocks (normally answered by the vDSO without a syscall), hash seeds.
    libc::SYS_clock_gettime,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    libc::SYS_getrandom,
    libc::SYS_gettid,
    libc::SYS_getpid,
    // Thread exit at shutdown.
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_set_robust_list,
    libc::SYS_rseq,
];

/// `PAGEMAP_SCAN`: `_IOWR('f', 16, struct pm_scan_arg)`, the one ioctl executors may make
/// (Linux's `fs/proc/task_mmu.c`; `pm_scan_arg` is twelve u64 fields). wasmtime issues it on the
/// pool's already-open `/proc/self/pagemap` to find the pages a call dirtied.
#[cfg(target_os = "linux")]
const PAGEMAP_SCAN: u64 = ioctl_read_write(b'f', 16, 12 * 8);

/// An ioctl request number, as Linux's `_IOWR` builds it: direction (read and write), argument
/// size, type and number.
#[cfg(target_os = "linux")]
const fn ioctl_read_write(kind: u8, number: u8, size: u64) -> u64 {
    (3 << 30) | (size << 16) | ((kind as u64) << 8) | number as u64
}

/// The executor allow-list, compiled to a BPF program.
pub struct ExecutorFilter {
    #[cfg(target_os = "linux")]
    program: seccompiler::BpfProgram,
}

impl ExecutorFilter {
    /// Compiles the allow-list for this machine's architecture.
    #[cfg(target_os = "linux")]
    pub fn new() -> Result<Self, ConfineError> {
        use seccompiler::{
            SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
            SeccompRule,
        };
        use std::collections::BTreeMap;
        let fail = |e: &dyn std::fmt::Display| ConfineError(e.to_string());
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
            ALLOWED.iter().map(|&sys| (sys, Vec::new())).collect();
        // Logs go to stdout and stderr. Replies wake tokio's reactor by writing 8 bytes to its
        // eventfd, whose number is not known here: allow exactly 8-byte writes elsewhere.
        let arg_is = |arg: u8, value: u64| {
            SeccompCondition::new(arg, SeccompCmpArgLen::Qword, SeccompCmpOp::Eq, value)
                .and_then(|c| SeccompRule::new(vec![c]))
                .map_err(|e| fail(&e))
        };
        let log_fds = vec![arg_is(0, 1)?, arg_is(0, 2)?];
        let mut writes = log_fds.clone();
        writes.push(arg_is(2, 8)?);
        rules.insert(libc::SYS_write, writes);
        rules.insert(libc::SYS_writev, log_fds);
        // The request is compared as 32 bits: the kernel reads ioctl's `cmd` as an unsigned int.
        let pagemap_scan =
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, PAGEMAP_SCAN)
                .and_then(|c| SeccompRule::new(vec![c]))
                .map_err(|e| fail(&e))?;
        rules.insert(libc::SYS_ioctl, vec![pagemap_scan]);
        let arch = std::env::consts::ARCH
            .try_into()
            .map_err(|e: seccompiler::BackendError| fail(&e))?;
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Errno(libc::EPERM as u32),
            SeccompAction::Allow,
            arch,
        )
        .map_err(|e| fail(&e))?;
        let program = filter.try_into().map_err(|e| fail(&e))?;
        Ok(Self { program })
    }

    /// Seccomp is Linux's; elsewhere executors cannot be confined, and say so.
    #[cfg(not(target_os = "linux"))]
    pub fn new() -> Result<Self, ConfineError> {
        Err(ConfineError("seccomp exists only on Linux".into()))
    }

    /// Installs the allow-list on the calling thread.
    #[cfg(target_os = "linux")]
    pub fn confine_this_thread(&self) -> Result<(), ConfineError> {
        seccompiler::apply_filter(&self.program).map_err(|e| ConfineError(e.to_string()))
    }

    /// Unreachable: [`ExecutorFilter::new`] fails off Linux.
    #[cfg(not(target_os = "linux"))]
    pub fn confine_this_thread(&self) -> Result<(), ConfineError> {
        Err(ConfineError("seccomp exists only on Linux".into()))
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_confined_thread_cannot_open_files_sockets_or_processes() {
        let outcome = std::thread::spawn(|| {
            let filter = ExecutorFilter::new().expect("compiling the filter");
            filter.confine_this_thread().expect("installing the filter");
            let file = std::fs::File::open("/etc/hostname").map_err(|e| e.raw_os_error());
            let socket = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.raw_os_error());
            // SAFETY: fork is only attempted; if it were allowed the child exits at once.
            let fork = unsafe { libc::fork() };
            if fork == 0 {
                // SAFETY: the child (if the fork were allowed) ends at once, touching nothing.
                unsafe { libc::_exit(0) };
            }
            let fork_errno = std::io::Error::last_os_error().raw_os_error();
            // What it may still do: allocate, and take a lock.
            let v = vec![7u8; 1 << 20];
            let m = parking_lot::Mutex::new(v.len());
            let allowed = *m.lock();
            (file.err(), socket.err(), (fork, fork_errno), allowed)
        })
        .join()
        .unwrap();
        let eperm = Some(Some(libc::EPERM));
        assert_eq!(outcome.0, eperm, "open");
        assert_eq!(outcome.1, eperm, "socket");
        assert_eq!(outcome.2, (-1, Some(libc::EPERM)), "fork");
        assert_eq!(outcome.3, 1 << 20);
        // Other threads are not confined.
        assert!(std::fs::File::open("/etc/hostname").is_ok());
    }

    #[test]
    fn a_confined_thread_may_scan_its_pagemap_and_make_no_other_ioctl() {
        use std::os::fd::AsRawFd;
        // Opened before confining, as wasmtime's pool opens it when the engine is built.
        let pagemap = std::fs::File::open("/proc/self/pagemap").unwrap();
        let fd = pagemap.as_raw_fd();
        let (scan, other) = std::thread::spawn(move || {
            ExecutorFilter::new()
                .unwrap()
                .confine_this_thread()
                .unwrap();
            let page = vec![0u8; 8192];
            let start = (page.as_ptr() as u64 + 4095) & !4095;
            // struct pm_scan_arg: size, flags, start, end, walk_end, vec, vec_len, max_pages,
            // then four category masks; no output vector, so it only walks the range.
            let mut arg = [0u64; 12];
            arg[0] = 12 * 8;
            arg[2] = start;
            arg[3] = start + 4096;
            // SAFETY: `arg` is a valid pm_scan_arg for the duration of the call.
            let scan = unsafe { libc::ioctl(fd, PAGEMAP_SCAN as _, arg.as_mut_ptr()) };
            let scan = (scan, std::io::Error::last_os_error().raw_os_error());
            let mut available: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int to the pointer given.
            let other = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut available) };
            let other = (other, std::io::Error::last_os_error().raw_os_error());
            (scan, other)
        })
        .join()
        .unwrap();
        // Whatever the kernel says of the scan, it was the kernel that answered, not the filter.
        assert!(
            scan.0 >= 0 || scan.1 != Some(libc::EPERM),
            "PAGEMAP_SCAN was refused: {scan:?}"
        );
        assert_eq!(other, (-1, Some(libc::EPERM)), "FIONREAD was let through");
        drop(pagemap);
    }
}
