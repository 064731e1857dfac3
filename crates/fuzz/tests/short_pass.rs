//! CI's short pass of every fuzz target: its seeds and a few tens of thousands of mutations of
//! them, a few seconds in release. The long runs are `scripts/fuzz TARGET`.

#[global_allocator]
static ALLOCATOR: mote_fuzz::alloc::Counting = mote_fuzz::alloc::Counting;

/// Inputs per target besides its seeds.
const INPUTS: usize = 50_000;

fn pass(name: &str) {
    let target = mote_fuzz::target(name).expect("a target of that name");
    mote_fuzz::short_pass(target, INPUTS);
}

#[test]
fn tokens() {
    pass("tokens");
}

#[test]
fn job_messages() {
    pass("job_messages");
}

#[test]
fn job_images() {
    pass("job_images");
}

#[test]
fn abi_response() {
    pass("abi_response");
}

#[test]
fn store_peer() {
    pass("store_peer");
}

#[test]
fn routes() {
    pass("routes");
}

#[test]
fn host() {
    pass("host");
}

/// Every target has a test above, so a new one cannot be left out of CI.
#[test]
fn every_target_is_passed() {
    let names: Vec<&str> = mote_fuzz::TARGETS.iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [
            "tokens",
            "job_messages",
            "job_images",
            "abi_response",
            "store_peer",
            "routes",
            "host",
        ]
    );
}

/// The allocation bound can fail: a decoder that reserves what a length claims is caught.
#[test]
#[should_panic(expected = "allocated")]
fn a_decoder_that_trusts_a_claimed_length_is_caught() {
    let claimed = u32::from_le_bytes(*b"\x00\x00\x10\x00") as usize;
    let (buffer, allocated) = mote_fuzz::alloc::peak(|| Vec::<u8>::with_capacity(claimed));
    drop(buffer);
    mote_fuzz::alloc::assert_within("a trusting decoder", 4, allocated, 64, 4096);
}
