//! Each role's filter applied as the node applies it, on a thread of its own, and each thing it
//! must refuse tried for real.

use super::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;

/// Runs `f` on a new thread confined to `role` as `mote up` confines it (a reader: its async
/// runtime built first, and its filter allowing that runtime's eventfd), and returns what it
/// returned.
fn confined<R: Send + 'static>(role: Role, f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let filter = match role {
            Role::Guest => Filter::new(Role::Guest),
            Role::Reader => Filter::reader(&crate::own_wakers(&runtime).unwrap()),
        };
        filter
            .expect("compiling the filter")
            .confine_this_thread()
            .expect("installing the filter");
        let answer = f();
        drop(runtime);
        answer
    })
    .join()
    .unwrap()
}

fn errno<T>(result: std::io::Result<T>) -> Option<i32> {
    result.err().and_then(|e| e.raw_os_error())
}

/// `errno` after a raw call that returned `ret`, or `None` if it succeeded.
fn last_errno(ret: i64) -> Option<i32> {
    (ret < 0).then(|| std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

const EPERM: Option<i32> = Some(libc::EPERM);

/// What every confined thread is refused: files, new sockets, connections, programs, tracing,
/// processes and threads.
fn refused_everywhere(addr: std::net::SocketAddr) -> Vec<(&'static str, Option<i32>)> {
    let mut tried = Vec::new();
    let program = c"/bin/true";
    let argv = [program.as_ptr(), std::ptr::null()];
    let envp = [std::ptr::null()];
    tried.push(("open", errno(std::fs::File::open("/etc/hostname"))));
    tried.push(("socket", errno(std::net::UdpSocket::bind("127.0.0.1:0"))));
    tried.push(("connect", errno(TcpStream::connect(addr))));
    // SAFETY: execve with valid NUL-terminated arrays; if it were allowed this test process
    // would become /bin/true, which the assertions below would notice by never running.
    tried.push((
        "execve",
        last_errno(unsafe { libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr()) } as i64),
    ));
    // SAFETY: PTRACE_TRACEME takes no pointers.
    tried.push((
        "ptrace",
        last_errno(unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) }),
    ));
    // SAFETY: fork is only attempted; if it were allowed the child exits at once.
    let fork = unsafe { libc::fork() };
    if fork == 0 {
        // SAFETY: the child (if the fork were allowed) ends at once, touching nothing.
        unsafe { libc::_exit(0) };
    }
    tried.push(("fork", last_errno(fork as i64)));
    tried.push(("thread", errno(std::thread::Builder::new().spawn(|| ()))));
    tried
}

#[test]
fn a_guest_thread_cannot_open_connect_execute_trace_or_start_anything() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    for (what, got) in confined(Role::Guest, move || refused_everywhere(addr)) {
        assert_eq!(got, EPERM, "{what}");
    }
}

#[test]
fn a_reader_cannot_open_connect_execute_trace_or_start_anything() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    for (what, got) in confined(Role::Reader, move || refused_everywhere(addr)) {
        assert_eq!(got, EPERM, "{what}");
    }
}

#[test]
fn a_guest_thread_cannot_write_eight_bytes_to_a_descriptor_it_was_not_given() {
    // The rule that let a reply wake an async runtime by writing 8 bytes to its eventfd also
    // let a guest write 8 bytes into any socket or file: it is gone.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    let fd = client.as_raw_fd();
    let written = confined(Role::Guest, move || {
        // SAFETY: writes 8 bytes from a live buffer to a descriptor this process holds.
        let ret = unsafe { libc::write(fd, b"8 bytes!".as_ptr().cast(), 8) };
        last_errno(ret as i64)
    });
    assert_eq!(written, EPERM);
    server.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 8];
    assert!(
        matches!((&server).read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "nothing reached the socket"
    );
}

#[test]
fn confined_threads_may_still_allocate_lock_and_log() {
    for role in [Role::Guest, Role::Reader] {
        let outcome = confined(role, || {
            let v = vec![7u8; 1 << 20];
            let m = parking_lot::Mutex::new(v.len());
            let allowed = *m.lock();
            let logged = std::io::stderr().write_all(b"").is_ok();
            (allowed, logged)
        });
        assert_eq!(outcome, (1 << 20, true), "{role:?}");
    }
    // Other threads are not confined.
    assert!(std::fs::File::open("/etc/hostname").is_ok());
}

#[test]
fn a_reader_serves_sockets_but_cannot_read_or_write_a_file_it_finds_open() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let file = tempfile_with(b"secret");
    let file_fd = file.as_raw_fd();
    let client = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"ping").unwrap();
        let mut back = [0u8; 4];
        s.read_exact(&mut back).unwrap();
        back
    });
    let (served, file_read, file_written) = confined(Role::Reader, move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4];
        stream.read_exact(&mut buf).unwrap();
        stream.write_all(b"pong").unwrap();
        let mut secret = [0u8; 6];
        // SAFETY: reads into and writes from live buffers of the lengths given.
        let read = unsafe { libc::read(file_fd, secret.as_mut_ptr().cast(), 6) };
        // SAFETY: as above.
        let written = unsafe { libc::write(file_fd, b"garbage!".as_ptr().cast(), 8) };
        (buf, last_errno(read as i64), last_errno(written as i64))
    });
    assert_eq!(&served, b"ping");
    assert_eq!(&client.join().unwrap(), b"pong");
    assert_eq!(file_read, EPERM, "read of a file");
    assert_eq!(file_written, EPERM, "write to a file");
    drop(file);
}

/// A file holding `contents`, open for reading and writing, already unlinked.
fn tempfile_with(contents: &[u8]) -> std::fs::File {
    let path = std::env::temp_dir().join(format!("mote-confine-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    file.write_all(contents).unwrap();
    std::fs::remove_file(&path).unwrap();
    file
}

#[test]
fn a_confined_thread_may_scan_its_pagemap_and_make_no_other_ioctl() {
    // Opened before confining, as wasmtime's pool opens it when the engine is built.
    let pagemap = std::fs::File::open("/proc/self/pagemap").unwrap();
    let fd = pagemap.as_raw_fd();
    let (scan, other) = confined(Role::Guest, move || {
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
        (scan, last_errno(other as i64))
    });
    // Whatever the kernel says of the scan, it was the kernel that answered, not the filter.
    assert!(
        scan.0 >= 0 || scan.1 != EPERM,
        "PAGEMAP_SCAN was refused: {scan:?}"
    );
    assert_eq!(other, EPERM, "FIONREAD was let through");
    drop(pagemap);
}

/// A reader sets timers on its own runtime (a request's header timeout, a call's budget), which
/// wakes that runtime through its eventfd: its filter lets it, and only there.
#[test]
fn a_reader_wakes_its_own_runtime_and_no_other_descriptor() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let other = client.as_raw_fd();
    let outcome = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let wakes = crate::own_wakers(&runtime).unwrap();
        Filter::reader(&wakes)
            .unwrap()
            .confine_this_thread()
            .unwrap();
        let slept = runtime.block_on(async {
            // A timer set while a later one is pending wakes the driver.
            let later = tokio::time::sleep(std::time::Duration::from_secs(60));
            tokio::pin!(later);
            tokio::select! {
                () = &mut later => false,
                () = tokio::time::sleep(std::time::Duration::from_millis(5)) => true,
            }
        });
        // SAFETY: writes 8 bytes from a live buffer to a descriptor this process holds.
        let ret = unsafe { libc::write(other, b"8 bytes!".as_ptr().cast(), 8) };
        (slept, last_errno(ret as i64))
    })
    .join()
    .unwrap();
    assert_eq!(outcome, (true, EPERM));
    drop((listener, client));
}
