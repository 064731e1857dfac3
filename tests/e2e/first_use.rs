//! What a new user meets first, done as the README and the help say: the help texts, the
//! start-up hints (run as printed), the CLI in a pipeline, and an `http://` URL for a TLS node.

use crate::cli::stdout;
use crate::platform::{Platform, mote_bin};
use mote_api::DeployParams;
use std::io::Write;
use std::process::{Command, Output, Stdio};

/// `mote ARGS` for `p`, with `stdin` on its standard input, and no credentials but those the
/// test gives.
fn mote_with_stdin(p: &Platform, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(mote_bin())
        .args(args)
        .args(["--server", &p.url])
        .env_remove("MOTE_TOKEN")
        .env_remove("MOTE_DATA")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn invoke_takes_its_body_as_an_argument_from_stdin_or_after_data() {
    let p = Platform::start(&[]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    for (args, stdin, expected) in [
        (&["invoke", "hello", "-"][..], "a pipe", "Hello, a pipe!\n"),
        (&["invoke", "hello", "text"][..], "", "Hello, text!\n"),
        (
            &["invoke", "hello", "--data", "-"][..],
            "stdin",
            "Hello, stdin!\n",
        ),
        (&["invoke", "hello", "--data=-x"][..], "", "Hello, -x!\n"),
    ] {
        let o = mote_with_stdin(&p, args, stdin.as_bytes());
        assert!(o.status.success(), "{args:?}: {o:?}");
        assert_eq!(stdout(&o), expected, "{args:?}");
    }
    let both = mote_with_stdin(&p, &["invoke", "hello", "a", "--data", "b"], b"");
    assert_eq!(both.status.code(), Some(2), "{both:?}");
}

#[test]
fn output_into_a_closed_pipe_ends_the_command_quietly() {
    let p = Platform::start(&[]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    for args in [&["ls"][..], &["invoke", "hello", "x"], &["nodes"]] {
        // The reader is gone before the command writes: what `| head -1` does to the rest.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o = Command::new(mote_bin())
            .args(args)
            .args(["--server", &p.url])
            .stdout(writer)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
            .wait_with_output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && stderr.is_empty(),
            "{args:?}: {:?} {stderr}",
            o.status
        );
    }
    // A server that is gone is still an error, not a quiet end.
    let url = p.url.clone();
    p.stop();
    let o = Command::new(mote_bin())
        .args(["ls", "--server", &url])
        .output()
        .unwrap();
    assert!(!o.status.success(), "{o:?}");
}

#[test]
fn the_help_names_every_kind_of_function() {
    let o = Command::new(mote_bin()).arg("--help").output().unwrap();
    let help = stdout(&o);
    for kind in ["mote_handle", "_start", "wasi:http", "mote_job_driver"] {
        assert!(help.contains(kind), "`mote --help` misses {kind}:\n{help}");
    }
}

#[test]
fn up_help_names_every_example_that_examples_deploys() {
    let o = Command::new(mote_bin())
        .args(["up", "--help"])
        .output()
        .unwrap();
    let help = stdout(&o);
    let from = help.find("--examples").expect("--examples is documented");
    let rest = &help[from + "--examples".len()..];
    let paragraph = &rest[..rest.find("\n      --").unwrap_or(rest.len())];
    let p = Platform::start(&["--examples"]);
    let deployed = p.function_names();
    assert!(deployed.len() >= 8, "{deployed:?}");
    for name in deployed {
        assert!(
            paragraph.contains(&name),
            "--examples deploys {name}, which its help does not name:{paragraph}"
        );
    }
}

#[test]
fn the_admin_token_message_says_how_the_cli_finds_a_data_dir_elsewhere() {
    let p = Platform::start(&["--require-tokens"]);
    let told = p.printed_line("the CLI sends it to this node with ");
    let data = p.data.display().to_string();
    assert!(told.contains(&format!("MOTE_DATA={data}")), "{told}");
    // Followed from another directory, as told, the CLI lists; without it, it is refused.
    let elsewhere = tempfile::tempdir().unwrap();
    let ls = |env: Option<&str>| {
        let mut command = Command::new(mote_bin());
        command
            .args(["ls", "--server", &p.url])
            .current_dir(elsewhere.path())
            .env_remove("MOTE_TOKEN")
            .env_remove("MOTE_DATA");
        if let Some(data) = env {
            command.env("MOTE_DATA", data);
        }
        command.output().unwrap()
    };
    let listed = ls(Some(&data));
    assert!(listed.status.success(), "{listed:?}");
    let refused = ls(None);
    assert!(!refused.status.success(), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("401"),
        "{refused:?}"
    );
}

#[test]
fn the_start_up_hints_of_a_node_on_every_address_work_as_printed() {
    let p = Platform::start_on("0.0.0.0:0", &["--examples", "--ui-listen", "off"]);
    let first = p.printed_line("try:  ");
    let second = p.printed_line("      curl");
    let second = second.split("   (").next().unwrap();
    for (hint, expected) in [
        (first.trim_start_matches("try:  "), "Hello, mote!"),
        (second.trim(), "a wasi:http component"),
    ] {
        assert!(!hint.contains("0.0.0.0"), "{hint}");
        let o = Command::new("sh")
            .args(["-c", &format!("{hint} --silent --show-error --fail")])
            .current_dir(p.data.parent().unwrap())
            .output()
            .unwrap();
        assert!(
            o.status.success() && stdout(&o).contains(expected),
            "`{hint}` answered {o:?}"
        );
    }
}

#[test]
fn an_http_url_for_a_tls_node_is_told_to_use_https() {
    let node = Platform::start_self_signed(&[]);
    let plain = node.url.replacen("https://", "http://", 1);
    let o = Command::new(mote_bin())
        .args(["ls", "--server", &plain])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{o:?}");
    assert!(
        stderr.contains("serves HTTPS") && stderr.contains("https://"),
        "{stderr}"
    );
    // A request with a body is told so too, and the node goes on serving https.
    let curl = Command::new("curl")
        .args([
            "--silent",
            "--data-binary",
            "@-",
            &format!("{plain}/v1/invoke/x"),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(stdout(&curl).contains("use an https:// URL"), "{curl:?}");
    assert_eq!(node.get("/healthz").status, 200);
}

/// The binary a user copies: small enough to ship, and still named inside for `perf`: its
/// symbol table is kept (only DWARF is left to `--profile profiling`). Tests build in the
/// release profile (`scripts/test`), the one users install.
#[test]
fn the_binary_is_under_70_mb_and_keeps_its_symbol_table() {
    let elf = std::fs::read(mote_bin()).unwrap();
    assert!(
        elf.len() < 70 << 20,
        "{} is {} MB",
        mote_bin(),
        elf.len() >> 20
    );
    let u16_at = |at: usize| usize::from(u16::from_le_bytes([elf[at], elf[at + 1]]));
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap()) as usize;
    assert_eq!(&elf[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let (table, entry, count) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c));
    let symbols: usize = (0..count)
        .map(|i| table + i * entry)
        .filter(|&header| elf[header + 4..header + 8] == 2u32.to_le_bytes())
        .map(|header| u64_at(header + 0x20) / u64_at(header + 0x38).max(1))
        .sum();
    assert!(symbols > 10_000, "{symbols} symbols in {}", mote_bin());
}
