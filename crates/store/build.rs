//! Generates mote store's peer protocol with the protoc binary that protoc-bin-vendored ships.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; prost-build reads PROTOC from the environment.
    unsafe { std::env::set_var("PROTOC", protoc) };
    println!("cargo:rerun-if-changed=proto/peer.proto");
    tonic_prost_build::configure().compile_protos(&["proto/peer.proto"], &["proto"])?;
    Ok(())
}
