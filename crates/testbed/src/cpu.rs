//! CPU pinning: the calling thread, a process about to start, or a running process with every
//! thread it has, confined to one CPU, so that a load generator and the server it measures (or a
//! node and the busy loops that slow it) never share a core.
//!
//! All three go through `sched_setaffinity`; a thread starts with its creator's CPUs, so what is
//! pinned stays pinned as it starts threads.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The set holding `cpu` alone.
fn only(cpu: usize) -> io::Result<libc::cpu_set_t> {
    let size = libc::CPU_SETSIZE as usize;
    if cpu >= size {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "there is no CPU {cpu}: a CPU set holds CPUs 0 to {}",
                size - 1
            ),
        ));
    }
    // SAFETY: `cpu_set_t` is a plain bit array for which all zeroes is the empty set, and
    // `CPU_SET` writes one bit inside it (the index is checked against CPU_SETSIZE above).
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        set
    };
    Ok(set)
}

/// Confines thread `tid` (0: the calling thread) to `set`.
fn confine(tid: libc::pid_t, set: &libc::cpu_set_t) -> io::Result<()> {
    // SAFETY: `sched_setaffinity` only reads the set, of exactly the size passed.
    match unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), set) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    confine(0, &only(cpu)?)
}

/// Makes `command` start its process on `cpu` alone, before the program runs, so that the
/// runtimes that size their thread pools from the CPUs they may use (tokio, wasmtime) see one.
/// A CPU the machine does not have fails the spawn.
pub fn pin_command(command: &mut Command, cpu: usize) -> io::Result<()> {
    let set = only(cpu)?;
    // SAFETY: the hook runs in the child between fork and exec, where only async-signal-safe
    // calls are allowed: it makes one system call on a set built before the fork, and its error
    // is built from errno without allocating.
    unsafe {
        command.pre_exec(move || confine(0, &set));
    }
    Ok(())
}

/// Pins every thread process `pid` has to `cpu` (as `taskset -a -p` does); the threads they
/// start afterwards inherit it.
pub fn pin_process(pid: u32, cpu: usize) -> io::Result<()> {
    let set = only(cpu)?;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let name = task?.file_name();
        let tid: libc::pid_t = name.to_str().and_then(|t| t.parse().ok()).ok_or_else(|| {
            io::Error::other(format!("/proc/{pid}/task/{name:?} is not a thread id"))
        })?;
        match confine(tid, &set) {
            // A thread that ended since the listing has nothing left to pin.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            other => other?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KilledOnDrop;
    use std::process::Stdio;

    /// `Cpus_allowed_list` of a `/proc/.../status` file, such as `0-1` or `1`.
    fn allowed(status: &str) -> String {
        let text = std::fs::read_to_string(status).unwrap();
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or_else(|| panic!("no Cpus_allowed_list in {status}: {text}"));
        line.trim().to_owned()
    }

    /// The highest CPU this process may run on: a CPU that exists, and on a machine of more
    /// than one, one that pinning must single out.
    fn last_cpu() -> usize {
        let list = allowed("/proc/self/status");
        let last = list.rsplit([',', '-']).next().unwrap();
        last.parse().unwrap()
    }

    fn sleeper(pin: Option<usize>) -> std::io::Result<KilledOnDrop> {
        let mut command = Command::new("sleep");
        command.arg("600").stdin(Stdio::null());
        if let Some(cpu) = pin {
            pin_command(&mut command, cpu)?;
        }
        Ok(KilledOnDrop::new(command.spawn()?))
    }

    #[test]
    fn a_pinned_command_starts_on_its_cpu_alone() {
        let cpu = last_cpu();
        let child = sleeper(Some(cpu)).unwrap();
        assert_eq!(
            allowed(&format!("/proc/{}/status", child.id())),
            cpu.to_string()
        );
    }

    #[test]
    fn a_command_pinned_to_a_cpu_the_machine_lacks_does_not_start() {
        // Below CPU_SETSIZE, so the set is built; the kernel refuses it in the child.
        let missing = libc::CPU_SETSIZE as usize - 1;
        assert!(missing > last_cpu());
        assert!(sleeper(Some(missing)).is_err());
        let beyond = pin_command(&mut Command::new("true"), libc::CPU_SETSIZE as usize);
        assert_eq!(beyond.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn every_thread_of_a_running_process_is_pinned() {
        let cpu = last_cpu();
        let child = sleeper(None).unwrap();
        pin_process(child.id(), cpu).unwrap();
        let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id())).unwrap();
        for task in tasks {
            let status = task.unwrap().path().join("status");
            assert_eq!(allowed(status.to_str().unwrap()), cpu.to_string());
        }
        assert!(pin_process(u32::MAX, cpu).is_err(), "no such process");
    }

    #[test]
    fn the_calling_thread_is_pinned_and_no_other() {
        let cpu = last_cpu();
        let before = allowed("/proc/self/status");
        let pinned = std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            allowed("/proc/thread-self/status")
        })
        .join()
        .unwrap();
        assert_eq!(pinned, cpu.to_string());
        assert_eq!(allowed("/proc/thread-self/status"), before);
    }
}
