//! libFuzzer over `mote_fuzz::host` (its doc says what it feeds and checks).
#![no_main]

#[global_allocator]
static ALLOCATOR: mote_fuzz::alloc::Counting = mote_fuzz::alloc::Counting;

libfuzzer_sys::fuzz_target!(
    init: mote_fuzz::write_seeds_from_env("host"),
    |data: &[u8]| mote_fuzz::host(data)
);
