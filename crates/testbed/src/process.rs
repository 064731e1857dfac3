//! Child processes that do not outlive their owner, and the loopback ports they listen on.

use std::io;
use std::net::TcpListener;
use std::ops::{Deref, DerefMut};
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicU32, Ordering};

/// A child process that is killed (SIGKILL) and reaped when this is dropped, so a panicking test
/// or a benchmark that gives up leaves no process running and no zombie behind.
///
/// It dereferences to the [`Child`], for its id, its pipes and waiting on it.
#[derive(Debug)]
pub struct KilledOnDrop(Child);

impl KilledOnDrop {
    /// Takes charge of `child`.
    pub fn new(child: Child) -> Self {
        Self(child)
    }

    /// Kills the process unless it has exited already, and reaps it: how it ended.
    pub fn kill_and_reap(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.0.try_wait()? {
            return Ok(status);
        }
        self.0.kill()?;
        self.0.wait()
    }
}

impl Deref for KilledOnDrop {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for KilledOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        // Nothing to report to: the owner is gone, and a process that cannot be killed or
        // waited for has already exited and been reaped.
        let _ = self.kill_and_reap();
    }
}

/// The lowest port [`free_ports`] hands out: below it are the well-known services' ports.
const LOWEST_PICKED: u16 = 10_000;

/// How far into the picking range the next call of [`free_ports`] in this process starts.
static NEXT_PICK: AtomicU32 = AtomicU32::new(0);

/// `n` distinct loopback ports that were free a moment ago, for processes that must be told
/// their ports before they start (replicas that name each other).
///
/// They are picked below the kernel's ephemeral range (`ip_local_port_range`), so no listener
/// bound to port 0 and no outgoing connection can take one before the caller binds it, as it
/// could when these were ephemeral ports themselves; and a process never hands out a port
/// twice, so two tests of one process never share one. Only another process binding these
/// very ports could still take one.
pub fn free_ports(n: usize) -> io::Result<Vec<u16>> {
    let below = ephemeral_low().unwrap_or(32_768);
    let span = u32::from(below.saturating_sub(LOWEST_PICKED));
    if span < 1_000 {
        return ephemeral_ports(n);
    }
    // Processes picking at once start at different points of the range.
    let offset = std::process::id().wrapping_mul(7_919);
    let mut held = Vec::with_capacity(n);
    let mut ports = Vec::with_capacity(n);
    for _ in 0..span {
        if ports.len() == n {
            break;
        }
        let step = NEXT_PICK.fetch_add(1, Ordering::Relaxed);
        let port = LOWEST_PICKED + (offset.wrapping_add(step) % span) as u16;
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            held.push(listener);
            ports.push(port);
        }
    }
    match ports.len() == n {
        true => Ok(ports),
        false => Err(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            format!(
                "only {} of {n} loopback ports below {below} are free",
                ports.len()
            ),
        )),
    }
}

/// The lowest port the kernel hands out for port 0 and outgoing connections.
fn ephemeral_low() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// `n` distinct ephemeral ports, where the kernel leaves no room below its range.
fn ephemeral_ports(n: usize) -> io::Result<Vec<u16>> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn sleeper() -> KilledOnDrop {
        let child = Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .spawn()
            .expect("starting sleep");
        KilledOnDrop::new(child)
    }

    /// Whether `pid` is a process that has not been reaped (running or a zombie).
    fn exists(pid: u32) -> bool {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn a_dropped_process_is_killed_and_reaped() {
        let child = sleeper();
        let pid = child.id();
        assert!(exists(pid));
        drop(child);
        assert!(!exists(pid), "process {pid} is still there");
    }

    #[test]
    fn kill_and_reap_reports_how_it_ended_and_may_be_repeated() {
        let mut child = sleeper();
        let status = child.kill_and_reap().unwrap();
        assert!(!status.success(), "{status}");
        assert_eq!(child.kill_and_reap().unwrap(), status);

        let mut done = KilledOnDrop::new(Command::new("true").spawn().unwrap());
        while done.try_wait().unwrap().is_none() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(done.kill_and_reap().unwrap().success());
    }

    // Whether the ports are still free when bound is not tested: any connection made meanwhile
    // (by another test in this process) may take one as its source port.
    #[test]
    fn free_ports_are_distinct() {
        let mut ports = free_ports(5).unwrap();
        assert_eq!(ports.len(), 5);
        assert!(ports.iter().all(|&p| p != 0), "{ports:?}");
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 5);
    }

    #[test]
    fn free_ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let low = ephemeral_low().unwrap_or(32_768);
        let first = free_ports(8).unwrap();
        let second = free_ports(8).unwrap();
        let all: std::collections::BTreeSet<u16> = first.iter().chain(&second).copied().collect();
        assert_eq!(
            all.len(),
            16,
            "a port was handed out twice: {first:?} {second:?}"
        );
        if low > LOWEST_PICKED + 1_000 {
            assert!(
                all.iter().all(|p| (LOWEST_PICKED..low).contains(p)),
                "{all:?}"
            );
        }
        for port in all {
            TcpListener::bind(("127.0.0.1", port)).unwrap();
        }
    }
}
