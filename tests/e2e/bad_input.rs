//! Bad input gets a precise error, nothing is stored, and the platform keeps serving: the
//! platform `mote up` runs, started in this process ([`Platform::in_process`]).

use crate::fixtures;
use crate::platform::Platform;
use mote_api::DeployParams;

/// Deploys `wasm` expecting a 400 whose message contains every one of `needles`; checks that
/// nothing was stored under that name.
fn rejected(p: &Platform, wasm: &[u8], needles: &[&str]) {
    let r = p.put("/v1/functions/bad", wasm);
    assert_eq!(r.status, 400, "{}", r.text());
    let error = r.error();
    for needle in needles {
        assert!(
            error.contains(needle),
            "error {error:?} does not mention {needle:?}"
        );
    }
    assert_eq!(
        p.get("/v1/functions/bad").status,
        404,
        "a rejected module was stored"
    );
}

#[test]
fn rejected_modules_name_the_problem_and_store_nothing() {
    let p = Platform::in_process(|_| {});
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    rejected(
        &p,
        b"#!/bin/sh\necho hi\n",
        &["not a WebAssembly module", "magic"],
    );
    rejected(&p, b"", &["empty"]);
    rejected(
        &p,
        b"\0asm\x01\0\0\0\x01\xff\xff",
        &["invalid WebAssembly module"],
    );
    rejected(
        &p,
        &fixtures::no_exports(),
        &["mote_handle", "_start", "main"],
    );
    rejected(
        &p,
        &fixtures::wrong_signature(),
        &["mote_handle", "(param i32 i32) (result i64)"],
    );
    rejected(
        &p,
        &fixtures::unknown_import(),
        &["env", "open_socket", "does not provide"],
    );
    rejected(&p, &[0, b'a', b's', b'm', 0x0d, 0, 1, 0], &["component"]);
    let r = p.put(
        "/v1/functions/big?memory_mb=16",
        &fixtures::big_initial_memory(),
    );
    assert_eq!(r.status, 400);
    assert!(r.error().contains("memory_mb=32"), "{}", r.error());

    assert_eq!(p.function_names(), ["hello"]);
    assert_eq!(
        p.invoke("hello", b"still here").text(),
        "Hello, still here!\n"
    );
}

#[test]
fn bad_names_and_parameters_are_400() {
    let p = Platform::in_process(|_| {});
    let r = p.put("/v1/functions/Bad.Name", mote_guests::HELLO.wasm);
    assert_eq!(r.status, 400);
    assert!(r.error().contains("a-z, 0-9"), "{}", r.error());
    for (query, needle) in [
        ("?timeout_ms=0", "timeout_ms=0"),
        ("?memory_mb=100000", "memory_mb=100000"),
        ("?timeout_ms=soon", "timeout_ms"),
    ] {
        let r = p.put(&format!("/v1/functions/ok{query}"), mote_guests::HELLO.wasm);
        assert_eq!(r.status, 400, "{query}");
        assert!(r.error().contains(needle), "{query}: {}", r.error());
    }
    assert_eq!(p.get("/v1/functions/ok").status, 404);
}

#[test]
fn unknown_names_and_routes_are_404() {
    let p = Platform::in_process(|_| {});
    let r = p.invoke("nope", b"");
    assert_eq!(r.status, 404);
    assert!(
        r.error().contains("`nope` is not deployed"),
        "{}",
        r.error()
    );
    assert_eq!(p.get("/v1/functions/nope").status, 404);
    assert_eq!(p.get("/v2/whatever").status, 404);
    assert!(p.get("/v2/whatever").error().contains("/v1/functions"));
}

#[test]
fn guest_failures_are_500_with_the_reason() {
    let p = Platform::in_process(|_| {});
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    p.deploy("trap", &fixtures::trap(), &DeployParams::default());
    p.deploy("exit3", &fixtures::wasi_exit3(), &DeployParams::default());
    p.deploy("liar", &fixtures::bad_response(), &DeployParams::default());
    p.deploy(
        "deep",
        &fixtures::stack_overflow(),
        &DeployParams::default(),
    );

    let r = p.invoke("trap", b"");
    assert_eq!(r.status, 500);
    assert!(r.error().contains("unreachable"), "{}", r.error());

    let r = p.invoke("exit3", b"");
    assert_eq!(r.status, 500);
    assert!(
        r.error().contains("status 3") && r.error().contains("oops"),
        "{}",
        r.error()
    );

    let r = p.invoke("liar", b"");
    assert_eq!(r.status, 500);
    assert!(r.error().contains("outside its memory"), "{}", r.error());

    let r = p.invoke("deep", b"");
    assert_eq!(r.status, 500);
    assert!(r.error().contains("call stack exhausted"), "{}", r.error());

    assert_eq!(p.invoke("hello", b"ok").text(), "Hello, ok!\n");
}

#[test]
fn oversized_bodies_are_413() {
    let p = Platform::in_process(|c| {
        c.gateway.max_body_bytes = 1 << 20;
        c.gateway.max_module_bytes = 1 << 20;
    });
    p.deploy("echo", mote_guests::ECHO.wasm, &DeployParams::default());
    let r = p.invoke("echo", &vec![b'x'; (1 << 20) + 1]);
    assert_eq!(r.status, 413);
    assert!(
        r.error().contains("request body") && r.error().contains("1048576"),
        "{}",
        r.error()
    );
    let r = p.put("/v1/functions/huge", &vec![0; 2 << 20]);
    assert_eq!(r.status, 413);
    assert!(r.error().contains("module"), "{}", r.error());
    let r = p.invoke("echo", &vec![b'y'; 1 << 20]);
    assert_eq!((r.status, r.body.len()), (200, 1 << 20));
}
