//! The descriptors an async runtime wakes itself through ([`own_wakers`]), which a reader's
//! filter lets it write to, and nothing else.
//!
//! A reader's runtime wakes its own I/O driver whenever a timer is set earlier than the one it
//! sleeps for (a request's header timeout, a call's budget): tokio writes 8 bytes to the
//! driver's eventfd, from the thread that sets the timer. So a reader must write to that one
//! descriptor. Tokio does not say which it is; the kernel does: it is the eventfd registered
//! in the runtime's epoll instance (`/proc/self/fdinfo/EPOLL` lists each registered
//! descriptor as `tfd: N`). Which epoll instance is the runtime's is found with a probe: an
//! eventfd of mote's own, registered with the runtime and held open while the process's epoll
//! instances are read, is registered in that one alone. If no waker is found (a runtime built
//! another way), that is an error: the reader is not started rather than started with a wider
//! filter.

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The eventfds `runtime` (one with an I/O driver) wakes itself through.
pub fn own_wakers(runtime: &tokio::runtime::Runtime) -> std::io::Result<Vec<RawFd>> {
    // SAFETY: eventfd takes no pointers; a valid descriptor is owned by the `OwnedFd` below.
    let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` was just opened and is owned by nothing else.
    let probe = unsafe { OwnedFd::from_raw_fd(raw) };
    let registered = {
        let _entered = runtime.enter();
        // SAFETY: `probe` owns its descriptor, which stays open (and the same) until the
        // `AsyncFd` that owns `probe` is dropped.
        unsafe { tokio::io::unix::AsyncFd::register(probe) }.map_err(std::io::Error::other)?
    };
    let probe = registered.as_raw_fd();
    let mut wakers = BTreeSet::new();
    for fd in open_fds()? {
        if kind(fd).as_deref() != Some("anon_inode:[eventpoll]") {
            continue;
        }
        let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else {
            continue;
        };
        let listed: Vec<RawFd> = registered_fds(&info).collect();
        if !listed.contains(&probe) {
            continue;
        }
        wakers.extend(
            listed
                .into_iter()
                .filter(|&r| r != probe && kind(r).as_deref() == Some("anon_inode:[eventfd]")),
        );
    }
    drop(registered);
    if wakers.is_empty() {
        return Err(std::io::Error::other(
            "cannot find the eventfd the reader's async runtime wakes itself through, so the reader cannot be confined; run `mote up --seccomp off` to run without confinement",
        ));
    }
    Ok(wakers.into_iter().collect())
}

/// The descriptors open in the process now.
fn open_fds() -> std::io::Result<BTreeSet<RawFd>> {
    Ok(std::fs::read_dir("/proc/self/fd")?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect())
}

/// What descriptor `fd` is (`anon_inode:[eventfd]`, `socket:[...]`, a path), if it is open.
fn kind(fd: RawFd) -> Option<String> {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .ok()
        .map(|target| target.to_string_lossy().into_owned())
}

/// The descriptors an epoll instance's `fdinfo` lists as registered (`tfd:` lines).
fn registered_fds(info: &str) -> impl Iterator<Item = RawFd> + '_ {
    info.lines().filter_map(|line| {
        let rest = line.strip_prefix("tfd:")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoll_instances_registered_descriptors_are_read_from_its_fdinfo() {
        let info = "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1038\n\
                    tfd:        4 events: 80000019 data:                4  pos:0 ino:40e sdev:10\n\
                    tfd:       12 events:       19 data:        80000000  pos:0 ino:40e sdev:10\n";
        assert_eq!(registered_fds(info).collect::<Vec<_>>(), [4, 12]);
        assert_eq!(registered_fds("pos:\t0\n").count(), 0);
    }

    #[test]
    fn a_runtime_is_found_by_the_eventfd_in_its_own_epoll_instance() {
        let runtimes: Vec<_> = (0..3)
            .map(|_| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
            })
            .collect();
        let wakers: Vec<Vec<RawFd>> = runtimes.iter().map(|r| own_wakers(r).unwrap()).collect();
        for found in &wakers {
            assert_eq!(found.len(), 1, "{wakers:?}");
            assert_eq!(kind(found[0]).as_deref(), Some("anon_inode:[eventfd]"));
        }
        assert!(
            wakers[0] != wakers[1] && wakers[1] != wakers[2],
            "each runtime has its own: {wakers:?}"
        );
        let timers_only = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let outcome = std::panic::catch_unwind(|| own_wakers(&timers_only));
        assert!(
            !matches!(outcome, Ok(Ok(_))),
            "a runtime without an I/O driver has no eventfd to find"
        );
    }
}
