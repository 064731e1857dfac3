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
