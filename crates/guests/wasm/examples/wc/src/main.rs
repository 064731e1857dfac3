//! `wc`: a plain WASI command, unchanged from what would run on a terminal. Reads stdin, prints
//! `{"lines": L, "words": W, "bytes": B}`.

use std::io::Read;

fn main() {
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut input) {
        eprintln!("wc: cannot read stdin: {e}");
        std::process::exit(1);
    }
    let lines = input.iter().filter(|&&b| b == b'\n').count();
    let words = input
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .count();
    println!(
        "{{\"lines\": {lines}, \"words\": {words}, \"bytes\": {}}}",
        input.len()
    );
}
