//! The example jobs on one node, on text the tests put in a bucket (several objects under the
//! prefix) and on generated input, against the sequential reference.

use super::{
    assert_all_close, assert_ranks, edge_objects, edges_of, kmeans_lines, lr_lines, node,
    objects_of, output, parse_centroids, parse_ranks, parse_weights, put_objects, reference,
    request, run_ok, split_objects,
};
use mote_api::DeployParams;

#[test]
fn lr_on_stored_points_matches_the_reference() {
    let p = node();
    p.deploy("lr", mote_guests::LR.wasm, &DeployParams::default());
    let objects = objects_of(&p);
    let (lines, points) = lr_lines(150, 11);
    // Three objects of 60, 50 and 40 points; the first has a blank line at its end.
    put_objects(&objects, "data", "train", &split_objects(&lines, &[60, 50]));
    put_objects(&objects, "results", "", &[]);
    // Beside the input and inside it, what a directory's reader leaves out: a sibling whose
    // name starts the same, a committed output's marker and a running job's staged part.
    let junk = [("part-0", "not a point\n".to_owned())];
    put_objects(&objects, "data", "train-old", &junk);
    put_objects(&objects, "data", "train/_temporary/9-9", &junk);
    put_objects(&objects, "data", "train", &[("_SUCCESS", String::new())]);

    let status = run_ok(
        &p,
        &request(
            "lr",
            None,
            3,
            &[
                ("input", "data/train"),
                ("iterations", "7"),
                ("step", "0.5"),
                ("output", "results/lr"),
            ],
        ),
    );
    assert_eq!(status.partitions, 6, "{status:?}");
    assert_eq!(status.iteration, 7, "{status:?}");
    let weights = parse_weights(&output(&objects, "results", "lr"));
    let want = reference::logistic_regression(&points, 7, 0.5);
    assert_eq!(want.len(), reference::data::FEATURES);
    assert_all_close("weights", &weights, &want);
}

#[test]
fn kmeans_on_stored_points_matches_the_reference() {
    let p = node();
    p.deploy("kmeans", mote_guests::KMEANS.wasm, &DeployParams::default());
    let objects = objects_of(&p);
    let (lines, points) = kmeans_lines(200, 3);
    put_objects(
        &objects,
        "data",
        "points",
        &split_objects(&lines, &[3, 120]),
    );
    put_objects(&objects, "results", "", &[]);

    run_ok(
        &p,
        &request(
            "kmeans",
            None,
            2,
            &[
                ("input", "data/points"),
                ("k", "4"),
                ("iterations", "6"),
                ("output", "results/kmeans"),
            ],
        ),
    );
    let centroids = parse_centroids(&output(&objects, "results", "kmeans"));
    let want = reference::kmeans(&points, 4, 6);
    assert_eq!(centroids.len(), want.len(), "{centroids:?}");
    for (i, (got, want)) in centroids.iter().zip(&want).enumerate() {
        assert_all_close(&format!("centroid {i}"), got, want);
    }
}

#[test]
fn pagerank_on_a_stored_edge_list_matches_the_reference() {
    let p = node();
    p.deploy(
        "pagerank",
        mote_guests::PAGERANK.wasm,
        &DeployParams::default(),
    );
    let objects = objects_of(&p);
    let graph = edge_objects();
    put_objects(&objects, "data", "graph", &graph);
    put_objects(&objects, "results", "", &[]);

    run_ok(
        &p,
        &request(
            "pagerank",
            None,
            2,
            &[
                ("input", "data/graph"),
                ("iterations", "12"),
                ("output", "results/ranks"),
            ],
        ),
    );
    let ranks = parse_ranks(&output(&objects, "results", "ranks"));
    let want = reference::pagerank(&edges_of(&graph), 12);
    assert_eq!(want.len(), 13, "vertices 0 to 12");
    assert_ranks(&ranks, &want);
    let total: f64 = ranks.iter().map(|(_, r)| r).sum();
    assert!((total - 1.0).abs() < 1e-12, "the ranks sum to {total}");
}

#[test]
fn generated_inputs_match_the_reference() {
    let p = node();
    p.deploy("lr", mote_guests::LR.wasm, &DeployParams::default());
    p.deploy(
        "pagerank",
        mote_guests::PAGERANK.wasm,
        &DeployParams::default(),
    );
    let objects = objects_of(&p);
    put_objects(&objects, "results", "", &[]);

    run_ok(
        &p,
        &request(
            "lr",
            None,
            4,
            &[
                ("generate", "1000"),
                ("seed", "42"),
                ("output", "results/lr"),
            ],
        ),
    );
    let weights = parse_weights(&output(&objects, "results", "lr"));
    let points = reference::generate_labelled_points(1000, 42);
    assert_all_close(
        "weights",
        &weights,
        &reference::logistic_regression(&points, 10, 1.0),
    );

    run_ok(
        &p,
        &request(
            "pagerank",
            None,
            3,
            &[
                ("generate", "300"),
                ("seed", "9"),
                ("iterations", "5"),
                ("output", "results/ranks"),
            ],
        ),
    );
    let ranks = parse_ranks(&output(&objects, "results", "ranks"));
    let edges = reference::generate_edges(300, 9);
    assert_ranks(&ranks, &reference::pagerank(&edges, 5));
}

/// Text with repeated words over several objects, and its counts by a plain sequential count.
fn words_text() -> (
    Vec<(&'static str, String)>,
    std::collections::BTreeMap<String, u64>,
) {
    let mut lines = Vec::new();
    for i in 0..400u64 {
        let words: Vec<String> = (0..(i % 9))
            .map(|j| format!("w{}", (i * 7 + j * j) % (3 + i % 40)))
            .collect();
        // Tabs, runs of spaces and non-ASCII words are whitespace and words as `split` has them.
        lines.push(format!("  {}\tλ{} ", words.join("   "), i % 3));
    }
    let mut counts = std::collections::BTreeMap::new();
    for word in lines.iter().flat_map(|l| l.split_whitespace()) {
        *counts.entry(word.to_owned()).or_insert(0) += 1;
    }
    (split_objects(&lines, &[1, 150, 100]), counts)
}

/// `word<TAB>count` lines as a map, refusing a word twice.
fn parse_counts(text: &str) -> std::collections::BTreeMap<String, u64> {
    let mut counts = std::collections::BTreeMap::new();
    for line in text.lines() {
        let (word, n) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("line {line:?}"));
        let old = counts.insert(word.to_owned(), n.parse().unwrap());
        assert_eq!(old, None, "{word} is counted twice");
    }
    counts
}

#[test]
fn wordcount_and_a_join_match_a_sequential_count_at_any_partition_count() {
    let p = node();
    p.deploy(
        "wordcount",
        mote_guests::WORDCOUNT.wasm,
        &DeployParams::default(),
    );
    p.deploy("sales", mote_guests::SALES.wasm, &DeployParams::default());
    let objects = objects_of(&p);
    let (text, want) = words_text();
    put_objects(&objects, "data", "text", &text);
    put_objects(&objects, "results", "", &[]);
    for ppc in [1, 3] {
        let out = format!("results/wc{ppc}");
        run_ok(
            &p,
            &request(
                "wordcount",
                None,
                ppc,
                &[("input", "data/text"), ("output", &out)],
            ),
        );
        let got = parse_counts(&output(&objects, "results", &format!("wc{ppc}")));
        assert_eq!(got, want, "{ppc} partitions a core");
    }

    // Customers 0..30 in three countries; orders of customers 0..40 (those past 29 unknown).
    let customers: Vec<String> = (0..30)
        .map(|c| format!("{c},name {c},{}", ["DE", "FR", "JP"][c % 3]))
        .collect();
    let orders: Vec<String> = (0..500u64)
        .map(|o| format!("{o},{},{}", o % 40, 100 + o * 37 % 1000))
        .collect();
    let mut cents = std::collections::BTreeMap::<String, u64>::new();
    for o in 0..500u64 {
        if o % 40 < 30 {
            *cents
                .entry(["DE", "FR", "JP"][(o % 40 % 3) as usize].to_owned())
                .or_default() += 100 + o * 37 % 1000;
        }
    }
    let want: std::collections::BTreeMap<String, String> = cents
        .into_iter()
        .map(|(c, v)| (c, format!("{}.{:02}", v / 100, v % 100)))
        .collect();
    put_objects(
        &objects,
        "data",
        "customers",
        &split_objects(&customers, &[10]),
    );
    put_objects(
        &objects,
        "data",
        "orders",
        &split_objects(&orders, &[200, 1]),
    );
    let args = [
        ("customers", "data/customers"),
        ("orders", "data/orders"),
        ("output", "results/sales"),
    ];
    run_ok(&p, &request("sales", None, 2, &args));
    let got: std::collections::BTreeMap<String, String> = output(&objects, "results", "sales")
        .lines()
        .map(|l| {
            let (c, v) = l.split_once('\t').unwrap();
            (c.to_owned(), v.to_owned())
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn an_operator_that_returns_an_error_fails_its_job_naming_the_function_and_the_line() {
    let p = node();
    p.deploy("sales", mote_guests::SALES.wasm, &DeployParams::default());
    let objects = objects_of(&p);
    put_objects(
        &objects,
        "data",
        "customers",
        &[("a", "1,ann,DE\n".to_owned())],
    );
    put_objects(
        &objects,
        "data",
        "orders",
        &[("a", "1,1,100\n2,1,ten cents\n".to_owned())],
    );
    put_objects(&objects, "results", "", &[]);
    let args = [
        ("customers", "data/customers"),
        ("orders", "data/orders"),
        ("output", "results/sales"),
    ];
    let error = super::run_failing(&p, &request("sales", None, 1, &args));
    for part in [
        "sales::order",
        "\"ten cents\"",
        "is not a whole number",
        "partition",
    ] {
        assert!(error.contains(part), "{part:?} is not in: {error}");
    }
    assert!(
        !objects.join("results/sales/_SUCCESS").exists(),
        "a failed job commits no output"
    );
}
