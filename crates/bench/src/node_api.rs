//! [`NodeApi`]: a benchmark's client of one node's public API for everything around what it
//! measures (deploys, the cluster view, running, polling and cancelling jobs): `mote_api`'s
//! typed [`ApiClient`] on a current-thread Tokio runtime of its own, so that the benchmarks'
//! synchronous set-up waits for each answer. The calls a benchmark measures do not go through
//! it: they keep the client they were measured with, so that results stay comparable with
//! earlier runs.

use bytes::Bytes;
use mote_api::{ApiClient, ApiError, DeployParams, FunctionInfo};
use std::time::Duration;

/// The longest one request may take: a deploy compiles the module first.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A client of one node's public API, for synchronous code. No token is sent: the benchmarks'
/// nodes serve on loopback, where none is asked.
pub(crate) struct NodeApi {
    /// Declared before the runtime, so that its pooled connections go before the runtime
    /// that drives them.
    client: ApiClient,
    runtime: tokio::runtime::Runtime,
}

impl NodeApi {
    /// A client of the node whose API is at `url`.
    pub(crate) fn new(url: &str) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let client =
            ApiClient::new(url, None, &mote_tls::Trust::default())?.with_timeout(REQUEST_TIMEOUT);
        Ok(Self { client, runtime })
    }

    /// Waits for the answer to `request`, made with the typed client.
    pub(crate) fn answer<'a, T, F>(
        &'a self,
        request: impl FnOnce(&'a ApiClient) -> F,
    ) -> Result<T, ApiError>
    where
        F: Future<Output = Result<T, ApiError>>,
    {
        self.runtime.block_on(request(&self.client))
    }

    /// Deploys `wasm` as `name` with `params`.
    pub(crate) fn deploy(
        &self,
        name: &str,
        wasm: &'static [u8],
        params: &DeployParams,
    ) -> Result<FunctionInfo, ApiError> {
        self.answer(|api| api.deploy(name, Bytes::from_static(wasm), params, |_| {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote_api::MemberState;
    use std::io::{BufRead, BufReader, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const VIEW: &str = r#"{"node": "n1", "store": {"endpoints": "http://127.0.0.1:2379",
        "reachable": true}, "nodes": [{"name": "n1", "url": "http://127.0.0.1:8080",
        "state": "up", "me": true, "cores": 1, "running": 0, "queued": 0, "work_ms": 0.0,
        "heard_ms_ago": 5}]}"#;

    /// Answers every request on `stream` with the cluster view, until the client closes it.
    fn serve(stream: TcpStream) {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        loop {
            let mut line = String::new();
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                if line == "\r\n" {
                    break;
                }
            }
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{VIEW}",
                VIEW.len()
            );
            writer.write_all(answer.as_bytes()).unwrap();
        }
    }

    #[test]
    fn answers_reach_synchronous_code_and_later_requests_reuse_the_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = accepted.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                counted.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || serve(stream.unwrap()));
            }
        });
        let api = NodeApi::new(&url).unwrap();
        for _ in 0..3 {
            let view = api.answer(|api| api.cluster()).unwrap();
            assert_eq!(view.node, "n1");
            assert_eq!(view.nodes[0].state, MemberState::Up);
        }
        // The runtime outlives each answer, so the pooled connection is still driven.
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_url_that_is_not_a_node_s_is_refused_naming_it() {
        let error = NodeApi::new("127.0.0.1:8080").err().unwrap().to_string();
        assert!(error.contains("`127.0.0.1:8080`"), "{error}");
    }
}
