//! Natively (unit tests) the host's `mote_job` imports do not exist: every call to one panics.

fn missing() -> ! {
    unimplemented!("the mote_job imports exist only in WebAssembly")
}

pub fn dataset(_: &str, _: bool) -> i32 {
    missing()
}
pub fn compute(_: i32, _: &[i32], _: &[i32]) {
    missing()
}
pub fn scatter(_: i32, _: &[i32], _: i32, _: &[i32]) {
    missing()
}
pub fn load(_: i32, _: i32, _: &str) {
    missing()
}
pub fn store(_: i32, _: i32, _: &str) {
    missing()
}
pub fn repeat(_: i32) {
    missing()
}
pub fn while_signal(_: i32, _: i32) {
    missing()
}
pub fn if_signal(_: i32, _: i32) {
    missing()
}
pub fn else_branch() {
    missing()
}
pub fn end() {
    missing()
}
pub fn partitions() -> i32 {
    missing()
}
pub fn arg(_: &str) -> Option<Vec<u8>> {
    missing()
}
pub fn input_count() -> i32 {
    missing()
}
pub fn input(_: i32) -> Vec<u8> {
    missing()
}
pub fn emit(_: i32, _: &[u8]) {
    missing()
}
