//! `echo`: returns the request body unchanged. The trivial function the benchmarks call, so they
//! measure the platform rather than the guest.

fn echo(body: &[u8]) -> Vec<u8> {
    body.to_vec()
}

mote_sdk::handler!(echo);
