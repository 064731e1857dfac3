//! libFuzzer over `mote_fuzz::job_messages` (its doc says what it feeds and checks).
#![no_main]

#[global_allocator]
static ALLOCATOR: mote_fuzz::alloc::Counting = mote_fuzz::alloc::Counting;

libfuzzer_sys::fuzz_target!(
    init: mote_fuzz::write_seeds_from_env("job_messages"),
    |data: &[u8]| mote_fuzz::job_messages(data)
);
