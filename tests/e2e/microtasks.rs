//! Functions that declare microtasks, through the real binary: object storage in the default
//! directory and in a real S3 server (s3s-fs), and the errors a user sees when storage fails.

use crate::fixtures;
use crate::platform::Platform;
use mote_api::DeployParams;
use mote_testbed::LocalS3;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A guest over bucket `bkt`, key `k`: an empty body reads the object, any other body is
/// written as the object. It answers the object call's status as one byte, then what the host
/// handed back (the object, or the error's message).
fn store_guest() -> Vec<u8> {
    fixtures::wasm(
        r#"(module
          (import "mote" "phase" (func $phase (param i32)))
          (import "mote" "object_get" (func $get (param i32 i32 i32 i32 i32) (result i32)))
          (import "mote" "object_put" (func $put (param i32 i32 i32 i32 i32 i32 i32) (result i32)))
          (memory (export "memory") 2)
          (data (i32.const 16) "bkt") (data (i32.const 32) "k")
          (global $next (mut i32) (i32.const 4096))
          (func (export "mote_alloc") (param i32) (result i32)
            (global.get $next)
            (global.set $next (i32.add (global.get $next) (local.get 0))))
          (func (export "mote_handle") (param $in i32) (param $len i32) (result i64)
            (local $status i32) (local $at i32)
            (call $phase (i32.const 100))
            (if (local.get $len)
              (then (local.set $status (call $put (i32.const 16) (i32.const 3) (i32.const 32)
                      (i32.const 1) (local.get $in) (local.get $len) (i32.const 8))))
              (else (local.set $status (call $get (i32.const 16) (i32.const 3) (i32.const 32)
                      (i32.const 1) (i32.const 8)))))
            ;; The reply: the status byte just before the handed-back bytes.
            (local.set $at (i32.sub (i32.load (i32.const 8)) (i32.const 1)))
            (if (i32.eqz (i32.load (i32.const 12))) (then (local.set $at (i32.const 1000))))
            (i32.store8 (local.get $at) (local.get $status))
            (i64.or (i64.shl (i64.extend_i32_u (local.get $at)) (i64.const 32))
                    (i64.extend_i32_u (i32.add (i32.load (i32.const 12)) (i32.const 1))))))"#,
    )
}

/// Splits a `store_guest` reply into its status and the rest, as text.
fn status_and_text(body: &[u8]) -> (u8, String) {
    (body[0], String::from_utf8_lossy(&body[1..]).into_owned())
}

#[test]
fn objects_live_in_the_data_directory_by_default_and_missing_ones_are_reported() {
    let p = Platform::start(&[]);
    p.deploy("store", &store_guest(), &DeployParams::default());
    // No bucket yet: S3's semantics, the guest is told which bucket and how to fix it.
    let r = p.invoke("store", b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let (status, message) = status_and_text(&r.body);
    assert_eq!(status, 2, "{message}");
    assert!(message.contains("`bkt`"), "{message}");
    std::fs::create_dir_all(p.data.join("objects/bkt")).unwrap();
    let (status, message) = status_and_text(&p.invoke("store", b"").body);
    assert_eq!(status, 1, "no such key yet: {message}");
    assert!(message.contains("`k`"), "{message}");
    let (status, _) = status_and_text(&p.invoke("store", b"kept").body);
    assert_eq!(status, 0);
    assert_eq!(
        std::fs::read(p.data.join("objects/bkt/k")).unwrap(),
        b"kept"
    );
    let (status, object) = status_and_text(&p.invoke("store", b"").body);
    assert_eq!((status, object.as_str()), (0, "kept"));
    let node = p.get("/v1/node").json();
    assert_eq!(node["microtasks"], "on");
    assert_eq!(node["classes"].as_array().unwrap().len(), 4);
}

#[test]
fn an_unreachable_s3_server_fails_fast_with_its_address_and_the_platform_keeps_serving() {
    // Port 9 (discard) on loopback: nothing listens there.
    let p = Platform::start_with_env(
        &["--s3-endpoint", "http://127.0.0.1:9"],
        &[("MOTE_S3_ACCESS_KEY", "k"), ("MOTE_S3_SECRET_KEY", "s")],
    );
    p.deploy("store", &store_guest(), &DeployParams::default());
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    let started = Instant::now();
    let r = p.invoke("store", b"lost?");
    assert_eq!(r.status, 200, "{}", r.text());
    let (status, message) = status_and_text(&r.body);
    assert_eq!(status, 5, "{message}");
    assert!(message.contains("127.0.0.1:9"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the call waited {:?}",
        started.elapsed()
    );
    assert_eq!(p.invoke("hello", b"still").text(), "Hello, still!\n");
    assert_eq!(p.function_names(), ["hello", "store"]);
}

#[test]
fn mote_up_refuses_s3_without_credentials_and_a_split_that_does_not_add_up() {
    for (args, expected) in [
        (
            vec!["--s3-endpoint", "http://127.0.0.1:9"],
            "MOTE_S3_ACCESS_KEY",
        ),
        (
            vec!["--cores", "2", "--core-split", "1,1,1,0"],
            "gives out 3 cores",
        ),
        (vec!["--core-split", "half"], "not a core split"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = Platform::up_command(dir.path(), &args)
            .env_remove("MOTE_S3_ACCESS_KEY")
            .env_remove("MOTE_S3_SECRET_KEY")
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} started");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

/// s3s-fs (the binary `./scripts/test` builds and names in `MOTE_S3S_FS`) serving a temporary
/// directory with bucket `bkt`, on a free port; killed on drop.
fn s3s_fs() -> LocalS3 {
    let binary = std::env::var("MOTE_S3S_FS").expect(
        "MOTE_S3S_FS must name the s3s-fs binary: run ./scripts/test, or ./scripts/s3s-fs and export it",
    );
    LocalS3::start(binary.as_ref(), "bkt").unwrap()
}

/// `mote up` against `s3`, with its credentials.
fn platform_on(s3: &LocalS3, args: &[&str]) -> Platform {
    let args: Vec<&str> = ["--s3-endpoint", s3.url()]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    Platform::start_with_env(
        &args,
        &[
            ("MOTE_S3_ACCESS_KEY", LocalS3::ACCESS_KEY),
            ("MOTE_S3_SECRET_KEY", LocalS3::SECRET_KEY),
        ],
    )
}

#[test]
fn objects_go_to_a_real_s3_server() {
    let s3 = s3s_fs();
    let p = platform_on(&s3, &[]);
    p.deploy("store", &store_guest(), &DeployParams::default());
    let (status, message) = status_and_text(&p.invoke("store", b"in s3").body);
    assert_eq!(status, 0, "{message}");
    assert_eq!(std::fs::read(s3.dir().join("bkt/k")).unwrap(), b"in s3");
    let (status, object) = status_and_text(&p.invoke("store", b"").body);
    assert_eq!((status, object.as_str()), (0, "in s3"));
}

/// Calls `name` with the JSON `request`, asserting success, and parses the JSON reply.
fn call_json(p: &Platform, name: &str, request: serde_json::Value) -> serde_json::Value {
    let r = p.invoke(name, request.to_string().as_bytes());
    assert_eq!(r.status, 200, "{name} {request}: {}", r.text());
    r.json()
}

#[test]
fn the_sort_application_sorts_through_a_real_s3_server_and_reports_what_is_missing() {
    let s3 = s3s_fs();
    let p = platform_on(&s3, &["--cores", "2"]);
    for guest in mote_guests::SORT {
        p.deploy(
            guest.name,
            guest.wasm,
            &DeployParams {
                memory_mb: Some(256),
                ..Default::default()
            },
        );
    }
    let (parts, categories, per_part) = (3u64, 4u64, 2_000u64);
    let mut checksum: u128 = 0;
    for part in 0..parts {
        let reply = call_json(
            &p,
            "sort-gen",
            serde_json::json!({"bucket": "bkt", "key": format!("input/{part:05}"),
                               "first": part * per_part, "records": per_part}),
        );
        assert_eq!(reply["records"], per_part);
        checksum = checksum
            .wrapping_add(u128::from_str_radix(reply["checksum"].as_str().unwrap(), 16).unwrap());
    }
    for part in 0..parts {
        let reply = call_json(
            &p,
            "sort-partition",
            serde_json::json!({"bucket": "bkt", "input": format!("input/{part:05}"),
                               "output": "parts/", "part": part, "categories": categories}),
        );
        assert_eq!(reply["records"], per_part);
        for sub in ["read", "partition", "write"] {
            let span: Vec<u64> = serde_json::from_value(reply["timings"][sub].clone())
                .unwrap_or_else(|e| panic!("timing {sub} of {reply}: {e}"));
            assert!(
                span.len() == 3 && span.is_sorted(),
                "timing {sub} is not [start, admitted, end] in order: {reply}"
            );
        }
    }
    let (mut records, mut sorted_checksum, mut previous_last) = (0, 0u128, String::new());
    for category in 0..categories {
        call_json(
            &p,
            "sort-category",
            serde_json::json!({"bucket": "bkt", "input": format!("parts/{category:05}/"),
                               "parts": parts, "output": format!("sorted/{category:05}")}),
        );
        let v = call_json(
            &p,
            "sort-validate",
            serde_json::json!({"bucket": "bkt", "key": format!("sorted/{category:05}")}),
        );
        assert_eq!(v["unordered"], 0, "{v}");
        records += v["records"].as_u64().unwrap();
        sorted_checksum = sorted_checksum
            .wrapping_add(u128::from_str_radix(v["checksum"].as_str().unwrap(), 16).unwrap());
        let first = v["first_key"].as_str().unwrap().to_owned();
        assert!(previous_last <= first, "categories overlap: {v}");
        previous_last = v["last_key"].as_str().unwrap().to_owned();
    }
    assert_eq!(records, parts * per_part);
    assert_eq!(sorted_checksum, checksum);

    // A part that does not exist: the call fails with a message naming it, nothing else is
    // touched, and the platform keeps serving.
    let r = p.invoke(
        "sort-category",
        serde_json::json!({"bucket": "bkt", "input": "parts/00000/", "parts": parts + 1,
                           "output": "sorted/broken"})
        .to_string()
        .as_bytes(),
    );
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(
        r.error().contains(&format!("parts/00000/{parts:05}")),
        "{}",
        r.error()
    );
    assert!(!s3.dir().join("bkt/sorted/broken").exists());
    let v = call_json(
        &p,
        "sort-validate",
        serde_json::json!({"bucket": "bkt", "key": "sorted/00000"}),
    );
    assert_eq!(v["unordered"], 0);
}

#[test]
fn ls_pages_through_a_bucket_of_more_than_a_thousand_objects() {
    let p = Platform::start(&[]);
    p.deploy("ls", mote_guests::LS.wasm, &DeployParams::default());
    let bucket = p.data.join("objects/many");
    std::fs::create_dir_all(bucket.join("in")).unwrap();
    // 2,345 objects under `in/`: three pages of the host's 1000; one more outside the prefix.
    for i in 0..2345 {
        std::fs::write(bucket.join(format!("in/{i:05}")), vec![b'x'; i % 7]).unwrap();
    }
    std::fs::write(bucket.join("other"), b"1").unwrap();
    let r = p.invoke("ls", b"many/in/");
    assert_eq!(r.status, 200, "{}", r.text());
    let text = r.text();
    let expected: Vec<String> = (0..2345).map(|i| format!("in/{i:05} {}", i % 7)).collect();
    assert_eq!(text.lines().collect::<Vec<_>>(), expected);
    assert_eq!(p.invoke("ls", b"many").text().lines().count(), 2346);

    let r = p.invoke("ls", b"nowhere");
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(r.error().contains("`nowhere`"), "{}", r.error());
    assert_eq!(p.invoke("ls", b"many/other").text(), "other 1\n");
}
