//! `sleep`: waits for the requested time without using the CPU, modelling SeBS's 010.sleep, the
//! suite's stand-in for a function that waits on something external (I/O, another service).
//! `std::thread::sleep` on wasm32-wasip1 is WASI's `poll_oneoff` on a clock, so the host blocks the
//! calling thread.
//!
//! Request: `ms=500` (also accepted as `size=500`, so a benchmark can scale every suite function
//! with the same parameter). Answer: `slept_ms=…`, the time asked for.

use std::time::Duration;

use suite_input::Params;

const DEFAULT_MS: u64 = 500;
/// mote's longest timeout is 900 s; asking for longer could only time out.
const MAX_MS: u64 = 900_000;

fn sleep(body: &[u8]) -> Vec<u8> {
    let params = Params::parse(body);
    let key = if params.get("ms").is_some() {
        "ms"
    } else {
        "size"
    };
    let ms = params.u64(key, DEFAULT_MS).min(MAX_MS);
    std::thread::sleep(Duration::from_millis(ms));
    format!("slept_ms={ms}\n").into_bytes()
}

mote_sdk::handler!(sleep);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_for_the_time_asked() {
        let start = std::time::Instant::now();
        assert_eq!(sleep(b"ms=20"), b"slept_ms=20\n");
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert_eq!(sleep(b"size=1"), b"slept_ms=1\n");
        assert_eq!(sleep(b"ms=0 size=99"), b"slept_ms=0\n");
    }
}
