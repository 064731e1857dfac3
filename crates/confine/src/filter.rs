//! The seccomp allow-lists of the threads that run guest code.
//!
//! A [`Role::Guest`] thread may manage memory (the instance pool and the allocator: `mmap`,
//! `mprotect`, `madvise`, ...), make the one ioctl that finds the pages a call dirtied
//! (`PAGEMAP_SCAN`, on the pool's `/proc/self/pagemap`, opened before), wait on and wake
//! futexes (queues, condvars, parked threads), take signals' alternate stacks and return from
//! them (wasmtime's trap handling), read clocks, draw random bytes, write to stdout and stderr
//! (logs) and exit. It has no other write: it wakes nothing by writing to an eventfd (that is
//! what [`crate::Relay`] is for).
//!
//! A [`Role::Reader`] thread serves connections too: it may wait on epoll and change its
//! interest list, accept connections, receive (`recvfrom`) and send (`sendto`), set and read
//! socket options, shut sockets down and close descriptors. Seccomp sees numbers, not
//! descriptors, so this is true of every socket of the process, which `docs/security.md`
//! spells out; but it has no `read` or `write` beyond stdout and stderr and 8 bytes on its own
//! runtime's eventfd ([`Filter::reader`]), so a file it finds open (the store's database, say)
//! stays out of reach, and nothing lets it open, create or connect a socket, execute, trace,
//! or start a thread or a process.
//!
//! Anything else fails with `EPERM` rather than killing the process, so a missed entry shows up
//! as a failed call with a clear error, not as a crash of the node. The filter is compiled once
//! ([`Filter::new`]) and installed by each thread as it starts ([`Filter::confine_this_thread`]):
//! it applies to that thread only (no `TSYNC`) and cannot be removed; since `clone` is not on
//! either list, a confined thread starts no other.

/// Installing a filter failed; a thread that would run guest code does not run unconfined
/// without saying so.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot confine the threads that run guest code with seccomp: {0}; run `mote up --seccomp off` to run without it"
)]
pub struct ConfineError(String);

impl ConfineError {
    pub(crate) fn new(why: String) -> Self {
        Self(why)
    }
}

/// What a confined thread does besides running guest code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Nothing: it computes (executors, microtask and job threads, the confined pool).
    Guest,
    /// It serves the connections it accepts, and runs calls where they are read.
    Reader,
}

std::thread_local! {
    /// The role this thread was confined to, or waived into.
    static ROLE: std::cell::Cell<Option<Role>> = const { std::cell::Cell::new(None) };
}

/// The role this thread was confined to ([`Filter::confine_this_thread`]), or waived into
/// ([`waive`]); `None` on a thread that may not run guest code.
#[inline]
pub fn role() -> Option<Role> {
    ROLE.get()
}

/// Lets this thread run guest code in `role` without a filter: what `mote up --seccomp off`
/// asks for, and only that.
pub fn waive(role: Role) {
    ROLE.set(Some(role));
}

/// Syscalls every confined thread may make with any arguments.
#[cfg(target_os = "linux")]
const GUEST: &[libc::c_long] = &[
    // Memory: the instance pool, copy-on-write images, the allocator.
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_madvise,
    libc::SYS_mremap,
    libc::SYS_brk,
    // Queues, condvars, parked threads; spinning threads yield.
    libc::SYS_futex,
    libc::SYS_sched_yield,
    // wasmtime's trap handling and per-thread signal stacks.
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigprocmask,
    libc::SYS_sigaltstack,
    // Clocks (normally answered by the vDSO without a syscall), hash seeds, CPU numbers.
    libc::SYS_clock_gettime,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    libc::SYS_getrandom,
    libc::SYS_getcpu,
    libc::SYS_gettid,
    libc::SYS_getpid,
    // Thread exit at shutdown.
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_set_robust_list,
    libc::SYS_rseq,
];

/// What a reader may add: serving sockets it holds.
#[cfg(target_os = "linux")]
const READER: &[libc::c_long] = &[
    #[cfg(target_arch = "x86_64")]
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    libc::SYS_epoll_ctl,
    libc::SYS_accept4,
    libc::SYS_recvfrom,
    libc::SYS_sendto,
    libc::SYS_shutdown,
    libc::SYS_close,
    libc::SYS_setsockopt,
    libc::SYS_getsockopt,
    libc::SYS_getpeername,
    libc::SYS_getsockname,
];

/// `PAGEMAP_SCAN`: `_IOWR('f', 16, struct pm_scan_arg)`, the one ioctl confined threads may make
/// (Linux's `fs/proc/task_mmu.c`; `pm_scan_arg` is twelve u64 fields). wasmtime issues it on the
/// pool's already-open `/proc/self/pagemap` to find the pages a call dirtied.
#[cfg(target_os = "linux")]
pub(crate) const PAGEMAP_SCAN: u64 = ioctl_read_write(b'f', 16, 12 * 8);

/// An ioctl request number, as Linux's `_IOWR` builds it: direction (read and write), argument
/// size, type and number.
#[cfg(target_os = "linux")]
const fn ioctl_read_write(kind: u8, number: u8, size: u64) -> u64 {
    (3 << 30) | (size << 16) | ((kind as u64) << 8) | number as u64
}

/// An allow-list compiled to a BPF program.
pub struct Filter {
    role: Role,
    #[cfg(target_os = "linux")]
    program: seccompiler::BpfProgram,
}

impl Filter {
    /// Compiles `role`'s allow-list for this machine's architecture (a reader's, without a
    /// runtime to wake: [`Filter::reader`]).
    pub fn new(role: Role) -> Result<Self, ConfineError> {
        Self::compile(role, &[])
    }

    /// Compiles a reader's allow-list, which may also write and read 8 bytes on `wakes`, the
    /// eventfds its own async runtime wakes itself through ([`crate::own_wakers`]).
    pub fn reader(wakes: &[std::os::fd::RawFd]) -> Result<Self, ConfineError> {
        Self::compile(Role::Reader, wakes)
    }

    #[cfg(target_os = "linux")]
    fn compile(role: Role, wakes: &[std::os::fd::RawFd]) -> Result<Self, ConfineError> {
        use seccompiler::{
            SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
            SeccompRule,
        };
        use std::collections::BTreeMap;
        let fail = |e: &dyn std::fmt::Display| ConfineError(e.to_string());
        let extra = match role {
            Role::Guest => &[][..],
            Role::Reader => READER,
        };
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = GUEST
            .iter()
            .chain(extra)
            .map(|&sys| (sys, Vec::new()))
            .collect();
        let rule = |arg: u8, len: SeccompCmpArgLen, value: u64| {
            SeccompCondition::new(arg, len, SeccompCmpOp::Eq, value)
                .and_then(|c| SeccompRule::new(vec![c]))
                .map_err(|e| fail(&e))
        };
        // Logs go to stdout and stderr, and nowhere else.
        let log_fds = vec![
            rule(0, SeccompCmpArgLen::Dword, 1)?,
            rule(0, SeccompCmpArgLen::Dword, 2)?,
        ];
        // A reader wakes its own runtime: 8 bytes to (and, were its counter full, from) its
        // eventfd.
        let wake = |fd: std::os::fd::RawFd| {
            let conditions = vec![
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, fd as u64),
                SeccompCondition::new(2, SeccompCmpArgLen::Qword, SeccompCmpOp::Eq, 8),
            ];
            conditions
                .into_iter()
                .collect::<Result<Vec<_>, _>>()
                .and_then(SeccompRule::new)
                .map_err(|e| fail(&e))
        };
        let wakes = wakes
            .iter()
            .map(|&fd| wake(fd))
            .collect::<Result<Vec<_>, _>>()?;
        let mut writes = log_fds.clone();
        writes.extend(wakes.iter().cloned());
        rules.insert(libc::SYS_write, writes);
        rules.insert(libc::SYS_writev, log_fds);
        if !wakes.is_empty() {
            rules.insert(libc::SYS_read, wakes);
        }
        // The request is compared as 32 bits: the kernel reads ioctl's `cmd` as an unsigned int.
        let pagemap_scan = rule(1, SeccompCmpArgLen::Dword, PAGEMAP_SCAN)?;
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
        Ok(Self { role, program })
    }

    /// Seccomp is Linux's; elsewhere threads cannot be confined, and say so.
    #[cfg(not(target_os = "linux"))]
    fn compile(role: Role, wakes: &[std::os::fd::RawFd]) -> Result<Self, ConfineError> {
        let _ = (role, wakes);
        Err(ConfineError("seccomp exists only on Linux".into()))
    }

    /// The role this filter confines a thread to.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Installs the allow-list on the calling thread, for good.
    #[cfg(target_os = "linux")]
    pub fn confine_this_thread(&self) -> Result<(), ConfineError> {
        seccompiler::apply_filter(&self.program).map_err(|e| ConfineError(e.to_string()))?;
        ROLE.set(Some(self.role));
        Ok(())
    }

    /// Unreachable: [`Filter::new`] fails off Linux.
    #[cfg(not(target_os = "linux"))]
    pub fn confine_this_thread(&self) -> Result<(), ConfineError> {
        Err(ConfineError("seccomp exists only on Linux".into()))
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
