//! Child processes that do not outlive their owner, and the loopback ports they listen on.

use std::io;
use std::net::TcpListener;
use std::ops::{Deref, DerefMut};
use std::process::{Child, ExitStatus};

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

/// `n` distinct loopback ports that were free a moment ago: all are held open at once while
/// they are picked, so they differ. Another process may take one before the caller binds it;
/// callers that can should retry on fresh ports.
pub fn free_ports(n: usize) -> io::Result<Vec<u16>> {
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
}
