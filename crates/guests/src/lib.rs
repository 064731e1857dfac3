//! mote's example guest functions, compiled from `wasm/` to `wasm32-wasip1` by this crate's build
//! script, so no binary is ever committed and tests and `mote up --examples` always run what the
//! sources say.
//!
//! `wasm/` is a separate Cargo workspace (it targets WebAssembly, not the host) holding the guest
//! SDK `mote-sdk` and the examples.

/// An example function: its name, what it does, and its module's bytes.
pub struct Example {
    /// The name it is deployed under.
    pub name: &'static str,
    /// One line for humans.
    pub about: &'static str,
    /// The WebAssembly module.
    pub wasm: &'static [u8],
}

macro_rules! example {
    ($name:literal, $about:literal) => {
        Example {
            name: $name,
            about: $about,
            wasm: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".wasm")),
        }
    };
}

/// `hello` (mote ABI): answers `Hello, <body>!`, or `Hello, world!` for an empty body.
pub const HELLO: Example = example!("hello", "greets the name in the request body (mote ABI)");
/// `echo` (mote ABI): returns its input unchanged; the trivial function benchmarks use.
pub const ECHO: Example = example!("echo", "returns the request body unchanged (mote ABI)");
/// `wc` (WASI command): counts lines, words and bytes of stdin and prints them as JSON.
pub const WC: Example = example!(
    "wc",
    "counts lines, words and bytes of the request body (WASI command)"
);

/// Every example, in the order `mote up --examples` deploys them.
pub const ALL: [Example; 3] = [HELLO, ECHO, WC];

#[cfg(test)]
mod tests {
    #[test]
    fn examples_are_webassembly_modules() {
        for e in super::ALL {
            assert!(
                e.wasm.starts_with(b"\0asm\x01\0\0\0"),
                "{} is not a core module",
                e.name
            );
        }
    }
}
