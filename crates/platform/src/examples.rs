//! The example functions a platform deploys when asked (`mote up --examples`): every example of
//! `mote_guests` (functions and jobs), and its `wasi:http` component on [`EXAMPLE_ROUTE`].

use crate::error::PlatformError;
use bytes::Bytes;
use mote_node::Node;
use mote_types::{DeployOptions, FunctionName, Grantor, HttpSettings, Limits, Route};

/// Where the example `wasi:http` component is mounted.
pub const EXAMPLE_ROUTE: &str = "/hello-http/...";

/// What [`deploy`] deploys, by name: the functions, the jobs and the `wasi:http` component.
pub fn names() -> (Vec<&'static str>, Vec<&'static str>, &'static str) {
    (
        mote_guests::ALL.iter().map(|e| e.name).collect(),
        mote_guests::JOBS.iter().map(|e| e.name).collect(),
        mote_guests::HTTP_HELLO.name,
    )
}

/// Deploys every example on `node`.
pub(crate) async fn deploy(node: &Node) -> Result<(), PlatformError> {
    let failed = |name: &'static str| move |source| PlatformError::Example { name, source };
    for example in mote_guests::ALL.into_iter().chain(mote_guests::JOBS) {
        let name = FunctionName::new(example.name).expect("the examples' names are names");
        node.deploy(name, Bytes::from_static(example.wasm), Limits::default())
            .await
            .map_err(failed(example.name))?;
    }
    let example = mote_guests::HTTP_HELLO;
    let options = DeployOptions {
        http: HttpSettings {
            route: Some(Route::parse(EXAMPLE_ROUTE).expect("EXAMPLE_ROUTE is a route")),
            allow_outbound: Vec::new(),
        },
        public: false,
        grantor: Grantor::Admin,
    };
    node.deploy_with(
        FunctionName::new(example.name).expect("the examples' names are names"),
        Bytes::from_static(example.wasm),
        Limits::default(),
        options,
    )
    .await
    .map_err(failed(example.name))?;
    Ok(())
}
