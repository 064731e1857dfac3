//! `hello`: greets the name in the request body. The example `mote up --examples` deploys.

fn greet(body: &[u8]) -> Vec<u8> {
    let name = match std::str::from_utf8(body).map(str::trim) {
        Ok("") => "world",
        Ok(name) => name,
        Err(_) => "stranger",
    };
    mote_sdk::log(&format!("greeting {name}"));
    format!("Hello, {name}!\n").into_bytes()
}

mote_sdk::handler!(greet);
