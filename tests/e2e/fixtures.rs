//! Guest modules for the tests, written in WAT so each one shows exactly the behaviour it tests.

pub fn wasm(wat_src: &str) -> Vec<u8> {
    wat::parse_str(wat_src).expect("fixture WAT parses")
}

/// A mote ABI guest with `body` as the body of `mote_handle`; memory has `pages` pages.
fn abi(pages: u32, handle_body: &str) -> Vec<u8> {
    wasm(&format!(
        r#"(module
            (memory (export "memory") {pages})
            (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
            (func (export "mote_handle") (param i32 i32) (result i64) {handle_body}))"#
    ))
}

/// Traps with `unreachable`.
pub fn trap() -> Vec<u8> {
    abi(1, "unreachable")
}

/// Loops forever.
pub fn spin() -> Vec<u8> {
    abi(1, "(loop $l (br $l)) i64.const 0")
}

/// Starting from no memory, grows by 1 MiB (16 pages) until `memory.grow` fails, then answers the
/// number of MiB it reached as 4 little-endian bytes at address 0.
pub fn memory_probe() -> Vec<u8> {
    abi(
        0,
        r#"(block $done (loop $grow
              (br_if $done (i32.eq (memory.grow (i32.const 16)) (i32.const -1)))
              (br $grow)))
           (i32.store (i32.const 0) (i32.shr_u (memory.size) (i32.const 4)))
           i64.const 4"#,
    )
}

/// Grows memory by 1 MiB until that fails, then traps, as a Rust guest whose allocation fails.
pub fn memory_bomb() -> Vec<u8> {
    abi(
        1,
        r#"(loop $grow
              (if (i32.eq (memory.grow (i32.const 16)) (i32.const -1)) (then unreachable))
              (br $grow))
           i64.const 0"#,
    )
}

/// Dirties 4 MiB of fresh memory, then loops forever.
pub fn hog() -> Vec<u8> {
    abi(
        1,
        r#"(local $p i32)
           (drop (memory.grow (i32.const 64)))
           (local.set $p (i32.const 65536))
           (loop $touch
             (i32.store (local.get $p) (i32.const 1))
             (local.set $p (i32.add (local.get $p) (i32.const 4096)))
             (br_if $touch (i32.lt_u (local.get $p) (i32.const 4259840))))
           (loop $l (br $l))
           i64.const 0"#,
    )
}

/// Busy-loops `iterations` times, then answers an empty body.
pub fn busy(iterations: u32) -> Vec<u8> {
    abi(
        1,
        &format!(
            r#"(local $i i32) (local.set $i (i32.const {iterations}))
               (loop $l (local.set $i (i32.sub (local.get $i) (i32.const 1)))
                        (br_if $l (local.get $i)))
               i64.const 0"#
        ),
    )
}

/// Loops `outer` times over a billion iterations: about a third of a second of a core each.
pub fn long_busy(outer: u32) -> Vec<u8> {
    abi(
        1,
        &format!(
            r#"(local $i i32) (local $j i32) (local.set $j (i32.const {outer}))
               (loop $o
                 (local.set $i (i32.const 1000000000))
                 (loop $l (local.set $i (i32.sub (local.get $i) (i32.const 1)))
                          (br_if $l (local.get $i)))
                 (local.set $j (i32.sub (local.get $j) (i32.const 1)))
                 (br_if $o (local.get $j)))
               i64.const 0"#
        ),
    )
}

/// Answers at once while its request body is empty; with a body, loops forever: a function
/// whose history says it is short until it is not.
pub fn turncoat() -> Vec<u8> {
    abi(1, "(if (local.get 1) (then (loop $l (br $l)))) i64.const 0")
}

/// Answers a response that lies outside its memory.
pub fn bad_response() -> Vec<u8> {
    abi(1, "i64.const 0x7fff000000000010")
}

/// A WASI command that writes "oops" to stderr and exits with status 3.
pub fn wasi_exit3() -> Vec<u8> {
    wasi_exit3_writing("oops\n")
}

/// A WASI command that writes `text` to stderr and exits with status 3: its call fails with a
/// message that quotes the stderr.
pub fn wasi_exit3_writing(text: &str) -> Vec<u8> {
    wasm(&format!(
        r#"(module
            (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
            (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
            (memory (export "memory") 1)
            (data (i32.const 16) "{}")
            (func (export "_start")
              (i32.store (i32.const 0) (i32.const 16))
              (i32.store (i32.const 4) (i32.const {}))
              (drop (call $fd_write (i32.const 2) (i32.const 0) (i32.const 1) (i32.const 8)))
              (call $exit (i32.const 3))))"#,
        wat_string(text),
        text.len()
    ))
}

/// `text` as a WAT string: every byte escaped, so a test's text is the guest's exactly.
pub fn wat_string(text: &str) -> String {
    text.bytes().map(|b| format!("\\{b:02x}")).collect()
}

/// A valid module with no entry point.
pub fn no_exports() -> Vec<u8> {
    wasm(r#"(module (func (export "main")))"#)
}

/// `mote_handle` with the wrong signature.
pub fn wrong_signature() -> Vec<u8> {
    wasm(
        r#"(module (memory (export "memory") 1)
            (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
            (func (export "mote_handle") (param i32) (result i32) i32.const 0))"#,
    )
}

/// Imports a function mote does not provide.
pub fn unknown_import() -> Vec<u8> {
    wasm(
        r#"(module (import "env" "open_socket" (func))
            (memory (export "memory") 1)
            (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
            (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0))"#,
    )
}

/// Starts with 32 MiB of memory.
pub fn big_initial_memory() -> Vec<u8> {
    abi(512, "i64.const 0")
}

/// Recurses without end until the wasm stack is exhausted.
pub fn stack_overflow() -> Vec<u8> {
    wasm(
        r#"(module (memory (export "memory") 1)
            (func $down (call $down))
            (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
            (func (export "mote_handle") (param i32 i32) (result i64) (call $down) i64.const 0))"#,
    )
}
