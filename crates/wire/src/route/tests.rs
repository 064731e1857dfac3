use super::*;
use axum::Router;
use axum::extract::{RawPathParams, RawQuery};
use axum::routing::any as serve_any;
use proptest::prelude::*;
use tower::ServiceExt;

/// What the router saw of a request: its method, the pattern it matched, the pattern's value
/// as a handler reads it (decoded), and the query.
type Seen = (String, String, Option<String>, Option<String>);

/// Every pattern, served the way the gateway serves them; each handler names its pattern.
fn router() -> Router {
    async fn with_value(
        pattern: &'static str,
        method: Method,
        params: RawPathParams,
        query: Option<String>,
    ) -> axum::Json<Seen> {
        let value = params.iter().next().map(|(_, v)| v.to_owned());
        axum::Json((method.to_string(), pattern.to_owned(), value, query))
    }
    let mut router = Router::new();
    for pattern in [STORE_PEERS, PULL] {
        router = router.route(
            pattern,
            serve_any(
                move |method: Method, RawQuery(query): RawQuery| async move {
                    axum::Json::<Seen>((method.to_string(), pattern.to_owned(), None, query))
                },
            ),
        );
    }
    for pattern in [
        INVOKE,
        MODULE,
        LOGS,
        JOB,
        JOB_RUN,
        JOB_MESSAGES,
        JOB_REPORTS,
    ] {
        router = router.route(
            pattern,
            serve_any(
                move |method: Method, params: RawPathParams, RawQuery(query): RawQuery| {
                    with_value(pattern, method, params, query)
                },
            ),
        );
    }
    router
}

fn every_route(value: &str, n: u64) -> [Route<'_>; 11] {
    [
        Route::Invoke { function: value },
        Route::Module { sha256: value },
        Route::StorePeers,
        Route::Pull,
        Route::Logs {
            function: value,
            from: LogsFrom::Tail(n as usize),
        },
        Route::Logs {
            function: value,
            from: LogsFrom::FollowAfter(n),
        },
        Route::JobStart { job: value },
        Route::JobRun { job: value },
        Route::JobMessage { job: value },
        Route::JobReport { job: value },
        Route::JobStop { job: value },
    ]
}

async fn seen(router: &Router, route: &Route<'_>) -> Seen {
    let request = axum::http::Request::builder()
        .method(route.method())
        .uri(route.url("http://127.0.0.1:1/"))
        .body(axum::body::Body::empty())
        .expect("a built route is a valid URI");
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200, "{route} matched no pattern");
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    serde_json::from_slice(&body).unwrap()
}

/// Checks that `route` lands on its own pattern, with `value` and its query intact.
async fn lands(router: &Router, route: &Route<'_>, value: &str) -> Result<(), TestCaseError> {
    let (method, matched, got, query) = seen(router, route).await;
    prop_assert_eq!(method, route.method().to_string());
    prop_assert_eq!(matched, route.pattern());
    let expected_value = route.value().map(|_| value.to_owned());
    prop_assert_eq!(got, expected_value);
    let expected_query = match route {
        Route::Logs {
            from: LogsFrom::Tail(n),
            ..
        } => Some(format!("tail={n}")),
        Route::Logs {
            from: LogsFrom::FollowAfter(seq),
            ..
        } => Some(format!("follow=true&after={seq}")),
        _ => None,
    };
    prop_assert_eq!(query, expected_query);
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// Any value, slashes, `?`, `%`, spaces and all, reaches the handler as it was given: no value
/// can add a segment, a query, or change which route it is.
#[test]
fn any_value_lands_on_its_pattern_and_reads_back() {
    let (runtime, router) = (runtime(), router());
    let values = any::<String>().prop_filter("a path segment is never empty", |v| !v.is_empty());
    proptest!(|(value in values, n in any::<u64>())| {
        runtime.block_on(async {
            for route in every_route(&value, n) {
                lands(&router, &route, &value).await?;
            }
            Ok::<_, TestCaseError>(())
        })?;
    });
}

/// Valid names go as they are: what the gateway sees in the raw path is the name itself.
#[test]
fn valid_names_are_not_escaped() {
    let (runtime, router) = (runtime(), router());
    let names = prop_oneof![
        "[a-z0-9][a-z0-9_-]{0,62}",
        "[0-9a-f]{64}",
        "[A-Za-z0-9._~-]{1,40}",
    ];
    proptest!(|(name in names)| {
        for route in every_route(&name, 7) {
            let path = route.to_string();
            if route.value().is_some() {
                prop_assert!(path.contains(&format!("/{name}")), "{path}");
            }
            runtime.block_on(lands(&router, &route, &name))?;
        }
    });
}

#[test]
fn a_url_joins_its_base_with_one_slash() {
    let route = Route::Module { sha256: "ab" };
    assert_eq!(
        route.url("http://n1:8080/"),
        "http://n1:8080/v1/internal/modules/ab"
    );
    assert_eq!(route.url("https://n1"), "https://n1/v1/internal/modules/ab");
    let logs = Route::Logs {
        function: "a b/c",
        from: LogsFrom::Tail(3),
    };
    assert_eq!(logs.to_string(), "/v1/internal/logs/a%20b%2Fc?tail=3");
}

/// Values a random string rarely is: dot segments, separators, escapes and a bare query mark.
#[test]
fn awkward_values_land_too() {
    let (runtime, router) = (runtime(), router());
    for value in [
        ".", "..", "a/b", "/", "?", "#", "%2F", "%", " ", "a?tail=1", "é",
    ] {
        for route in every_route(value, 1) {
            runtime
                .block_on(lands(&router, &route, value))
                .unwrap_or_else(|e| panic!("{value:?} on {route:?}: {e}"));
        }
    }
}
