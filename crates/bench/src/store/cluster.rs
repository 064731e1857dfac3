//! A cluster of mote store replicas or etcd members on loopback: started on free ports with
//! fresh data directories, waited for until every member answers, and stopped with a check that
//! none of its processes is left.

use super::config::{RANGE_KEY, StoreBenchConfig, System};
use mote_testbed::cpu_time::process_cpu;
use mote_testbed::{KilledOnDrop, free_ports, last_lines};
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One member of a cluster.
struct Member {
    child: KilledOnDrop,
    client: SocketAddr,
    stdout: PathBuf,
    stderr: PathBuf,
}

/// A running cluster of one system; dropping it kills whatever is still running.
pub(super) struct Cluster {
    system: System,
    members: Vec<Member>,
    /// The members' data directories and logs; removed when the cluster is dropped.
    dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts `size` members of `system` and waits until each answers a health check.
    pub(super) fn start(
        config: &StoreBenchConfig,
        system: System,
        size: usize,
    ) -> anyhow::Result<Self> {
        Self::launch(config, system, size).map_err(|e| {
            e.context(format!(
                "cannot start {} with {size} members",
                system.name()
            ))
        })
    }

    fn launch(config: &StoreBenchConfig, system: System, size: usize) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(&format!(
                "mote-bench-store-{}-{size}-",
                system.name().replace(' ', "-")
            ))
            .tempdir_in(&config.work_dir)?;
        let ports = free_ports(2 * size)?;
        let (clients, peers) = ports.split_at(size);
        let name = |i: usize| match system {
            System::Mote => format!("m{i}"),
            System::Etcd => format!("e{i}"),
        };
        let peer_url = |i: usize| format!("http://127.0.0.1:{}", peers[i]);
        let mut cluster = Cluster {
            system,
            members: Vec::new(),
            dir,
        };
        for i in 0..size {
            let data = cluster.dir.path().join(name(i));
            let client = SocketAddr::from(([127, 0, 0, 1], clients[i]));
            let mut command = match system {
                System::Mote => {
                    let mut c = Command::new(&config.mote);
                    let others: Vec<String> = (0..size)
                        .filter(|&j| j != i)
                        .map(|j| format!("{}={}", name(j), peer_url(j)))
                        .collect();
                    c.arg("store")
                        .args(["--name", &name(i)])
                        .args(["--listen", &client.to_string()])
                        .args(["--peer-listen", &format!("127.0.0.1:{}", peers[i])])
                        .arg("--data")
                        .arg(&data);
                    if !others.is_empty() {
                        c.args(["--peers", &others.join(",")]);
                    }
                    c
                }
                System::Etcd => {
                    let mut c = Command::new(config.tool("etcd"));
                    let initial: Vec<String> = (0..size)
                        .map(|j| format!("{}={}", name(j), peer_url(j)))
                        .collect();
                    let client_url = format!("http://{client}");
                    c.args(["--name", &name(i)])
                        .arg("--data-dir")
                        .arg(&data)
                        .args(["--listen-client-urls", &client_url])
                        .args(["--advertise-client-urls", &client_url])
                        .args(["--listen-peer-urls", &peer_url(i)])
                        .args(["--initial-advertise-peer-urls", &peer_url(i)])
                        .args(["--initial-cluster", &initial.join(",")])
                        .args(["--initial-cluster-state", "new"])
                        .args([
                            "--initial-cluster-token",
                            &format!("mote-bench-{}", ports[0]),
                        ]);
                    c
                }
            };
            let stdout = cluster.dir.path().join(format!("{}.out", name(i)));
            let stderr = cluster.dir.path().join(format!("{}.log", name(i)));
            let child = command
                .stdin(Stdio::null())
                .stdout(File::create(&stdout)?)
                .stderr(File::create(&stderr)?)
                .spawn()
                .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", system.name()))?;
            cluster.members.push(Member {
                child: KilledOnDrop::new(child),
                client,
                stdout,
                stderr,
            });
        }
        cluster.wait_ready(config)?;
        Ok(cluster)
    }

    /// Waits until every member is up (mote store prints a line when it listens) and
    /// `etcdctl endpoint health` succeeds against all of them.
    fn wait_ready(&mut self, config: &StoreBenchConfig) -> anyhow::Result<()> {
        let deadline = Instant::now() + config.start_timeout;
        loop {
            for (i, m) in self.members.iter_mut().enumerate() {
                if let Some(status) = m.child.try_wait()? {
                    anyhow::bail!(
                        "member {i} exited ({status}) while starting: {}",
                        last_lines(&m.stderr, 5)
                    );
                }
            }
            let listening = self.system == System::Etcd
                || self.members.iter().all(|m| {
                    std::fs::read_to_string(&m.stdout).is_ok_and(|s| s.contains(" is up: "))
                });
            if listening && self.healthy(config) {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "not healthy after {:?}; last log lines of member 0: {}",
                    config.start_timeout,
                    last_lines(&self.members[0].stderr, 5)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn healthy(&self, config: &StoreBenchConfig) -> bool {
        Command::new(config.tool("etcdctl"))
            .args(["--endpoints", &self.endpoints()])
            .args(["--command-timeout", "2s", "--dial-timeout", "1s"])
            .args(["endpoint", "health"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Where the members' data directories and logs are.
    pub(super) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Every member's client address, comma-separated, as `--endpoints` takes them.
    pub(super) fn endpoints(&self) -> String {
        let all: Vec<String> = self.members.iter().map(|m| m.client.to_string()).collect();
        all.join(",")
    }

    /// Writes [`RANGE_KEY`] through every member (on mote store a write reaches the other
    /// replicas only some milliseconds later; on etcd the extra writes are harmless).
    pub(super) fn write_range_key(&self, config: &StoreBenchConfig) -> anyhow::Result<()> {
        let value = "v".repeat(config.val_size as usize);
        for m in &self.members {
            let output = Command::new(config.tool("etcdctl"))
                .args(["--endpoints", &m.client.to_string()])
                .args(["put", RANGE_KEY, &value])
                .stdin(Stdio::null())
                .output()?;
            anyhow::ensure!(
                output.status.success(),
                "etcdctl put {RANGE_KEY} on {} failed: {}",
                m.client,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(())
    }

    /// CPU time (user + system) the members have used so far.
    pub(super) fn cpu_time(&self) -> Duration {
        self.members
            .iter()
            .filter_map(|m| process_cpu(m.child.id()))
            .sum()
    }

    /// Kills every member, reaps it and checks that no process of it is left. A benchmark's
    /// clusters hold nothing worth a graceful shutdown: their data directories are thrown away.
    pub(super) fn stop(mut self) -> anyhow::Result<()> {
        for m in &mut self.members {
            // A member that cannot be killed or reaped has exited and been reaped already.
            let _ = m.child.kill_and_reap();
        }
        for m in &self.members {
            let pid = m.child.id();
            if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) {
                // The pid may have been reused already; only our own command line counts.
                let ours = match self.system {
                    System::Mote => has_arg(&cmdline, "store"),
                    System::Etcd => has_arg(&cmdline, "--initial-cluster"),
                };
                anyhow::ensure!(!ours, "member process {pid} is still running after kill");
            }
        }
        Ok(())
    }
}

/// Whether a NUL-separated command line contains `arg`.
fn has_arg(cmdline: &[u8], arg: &str) -> bool {
    cmdline.split(|&b| b == 0).any(|a| a == arg.as_bytes())
}
