//! What the platform knows of the machine it runs on: its name, how its own listeners are
//! dialled, its cores and memory.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

/// The machine's host name, the default node name.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "mote".to_owned())
}

/// The address a process of this machine dials to reach a listener on `addr`: a listener on
/// every address (`0.0.0.0`, `[::]`) is reached on loopback, a name certificates and the
/// node's Host allow-list hold.
pub fn dialled_here(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(a) if a.ip().is_unspecified() => (Ipv4Addr::LOCALHOST, a.port()).into(),
        SocketAddr::V6(a) if a.ip().is_unspecified() => (Ipv6Addr::LOCALHOST, a.port()).into(),
        _ => addr,
    }
}

/// The number of cores this machine offers.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// OpenWhisk's default memory per action container; the baseline policy allows as many running
/// calls as fit the machine's memory at this size, as OpenWhisk's invoker does.
const BASELINE_CALL_MEMORY: u64 = 256 << 20;

/// The baseline policy's cap on running calls: physical memory / 256 MiB, at least one per core,
/// at most 256 (threads beyond that only measure the OS scheduler).
pub fn baseline_cap(cores: usize) -> usize {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map(|kib| kib * 1024)
        .unwrap_or(4 << 30);
    ((total / BASELINE_CALL_MEMORY) as usize).clamp(cores, 256)
}
