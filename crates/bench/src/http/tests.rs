//! Tests of the figures and the report, which share their fixtures.

use super::points::{AgainstNative, Comparison, Point, Round, System};
use super::report::{HttpReport, Machine, latency, ratio};
use super::servers::{wasmtime_optimize, wasmtime_serve_flags};

#[test]
fn latencies_and_ratios_read_at_a_glance() {
    assert_eq!(latency(87.4), "87 µs");
    assert_eq!(latency(1234.0), "1.23 ms");
    assert_eq!(latency(45_678.0), "45.7 ms");
    assert_eq!(latency(f64::NAN), "–");
    assert_eq!(ratio(3.414), "3.41x");
    assert_eq!(ratio(f64::INFINITY), "–");
}

fn point(system: System, rps: f64, p99: f64) -> Point {
    let round = Round {
        ok: rps as u64,
        requests_per_s: rps,
        p50_us: p99 / 4.0,
        p99_us: p99,
        p999_us: p99 * 2.0,
        max_us: p99 * 3.0,
        non_200: 0,
        errors: 0,
        reconnects: 0,
        first_failure: None,
        server_cpu_us_per_request: Some(10.0),
        generator_cpu_us_per_request: None,
        other_cores: Some(0.05),
        noisy_windows_discarded: 0,
    };
    Point::new(system, 32, vec![round])
}

#[test]
fn the_floor_needs_twice_the_rate_and_a_lower_p99() {
    let wasmtime = point(System::WasmtimeServe, 4000.0, 9000.0);
    let c = Comparison::new(&point(System::Mote, 12_000.0, 2000.0), &wasmtime);
    assert_eq!(c.requests_per_s_ratio, 3.0);
    assert!((c.p99_ratio - 2.0 / 9.0).abs() < 1e-12);
    assert!(c.meets_floor);
    let slower = Comparison::new(&point(System::Mote, 7_900.0, 2000.0), &wasmtime);
    assert!(!slower.meets_floor);
    let worse_tail = Comparison::new(&point(System::Mote, 40_000.0, 9000.0), &wasmtime);
    assert!(!worse_tail.meets_floor);
}

#[test]
fn ratios_are_paired_round_by_round() {
    let with_rounds = |system, rates: [f64; 3], p99s: [f64; 3]| {
        let template = point(system, 1.0, 1.0).rounds[0].clone();
        let rounds = rates
            .iter()
            .zip(p99s)
            .map(|(&requests_per_s, p99_us)| Round {
                requests_per_s,
                p99_us,
                ..template.clone()
            })
            .collect();
        Point::new(system, 32, rounds)
    };
    // The machine is faster in the second round, for both.
    let mote = with_rounds(System::Mote, [30.0, 60.0, 33.0], [2.0, 1.0, 2.0]);
    let wasmtime = with_rounds(System::WasmtimeServe, [10.0, 15.0, 10.0], [4.0, 4.0, 4.0]);
    let c = Comparison::new(&mote, &wasmtime);
    assert_eq!(c.requests_per_s_ratio_rounds, vec![3.0, 4.0, 3.3]);
    assert_eq!(c.requests_per_s_ratio, 3.3);
    assert_eq!(c.p99_ratio, 0.5);
    assert!(c.meets_floor);
}

#[test]
fn a_point_takes_the_median_of_its_rounds_and_sums_its_failures() {
    let mut rounds = point(System::Mote, 1.0, 1.0).rounds;
    let make = |rps: f64, failed: u64| Round {
        requests_per_s: rps,
        non_200: failed,
        ..rounds[0].clone()
    };
    rounds = vec![make(100.0, 0), make(300.0, 2), make(200.0, 1)];
    let p = Point::new(System::Mote, 8, rounds);
    assert_eq!(p.requests_per_s, 200.0);
    assert_eq!(p.failed, 3);
    assert_eq!(p.server_cpu_us_per_request, Some(10.0));
    assert_eq!(p.generator_cpu_us_per_request, None);
}

fn report(points: Vec<Point>, comparisons: Vec<Comparison>) -> HttpReport {
    HttpReport {
        command: "mote bench http".into(),
        date: "2026-11-26T00:00:00Z".into(),
        machine: Machine {
            nproc: 2,
            cpu: "a CPU".into(),
            kernel: "6.18".into(),
            load_at_start: "0 0 0".into(),
            load_at_end: "1 1 1".into(),
        },
        smoke: false,
        wasmtime_version: Some("wasmtime 48.0.8".into()),
        wasmtime_flags: Some(wasmtime_serve_flags(&wasmtime_optimize())),
        mote_cores: 2,
        pin: None,
        generator_threads: 2,
        seconds: 5.0,
        warmup_s: 1.0,
        rounds: 1,
        requests: vec![(System::Mote, "GET /hello-http/".into())],
        meets_floor: Some(comparisons.iter().all(|c| c.meets_floor)),
        failed: points.iter().map(|p| p.failed).sum(),
        points,
        reference: None,
        native: None,
        against_native: None,
        comparisons,
        bench_s: 60.0,
    }
}

#[test]
fn the_table_shows_every_point_the_ratios_and_the_floor() {
    let mote = point(System::Mote, 12_000.0, 2000.0);
    let wasmtime = point(System::WasmtimeServe, 4000.0, 9000.0);
    let c = Comparison::new(&mote, &wasmtime);
    let r = report(vec![mote, wasmtime], vec![c]);
    let table = r.table();
    assert!(
        table.contains(
            "| mote | 32 | 12000 | 500 µs | 2.00 ms | 4.00 ms | 10 µs | – | 0.05 cores | 0 |"
        ),
        "{table}"
    );
    assert!(table.contains("| wasmtime serve | 32 | 4000 |"), "{table}");
    assert!(
        table.contains("| 32 | 3.00x | 3.00x | 0.22x | 0.22x | met |"),
        "{table}"
    );
    assert!(table.contains("At 32 connections (the issue's wrk set-up): met"));
    assert!(table.contains("Floor at every concurrency: met"), "{table}");
    assert!(!table.contains("Noisy run"), "{table}");
    assert!(r.check().is_ok());
}

#[test]
fn a_run_with_a_failed_request_fails_its_check() {
    let mut mote = point(System::Mote, 12_000.0, 2000.0);
    mote.rounds[0].non_200 = 1;
    mote.rounds[0].first_failure = Some("GET /hello-http/ answered 500".into());
    mote.failed = 1;
    let r = report(vec![mote], vec![]);
    let err = r.check().unwrap_err().to_string();
    assert!(err.contains("answered 500"), "{err}");
    assert!(r.table().contains("**1 request(s) failed**"));
}

#[test]
fn the_guests_are_judged_against_the_native_handler() {
    let native = point(System::MoteNative, 100_000.0, 1000.0);
    let hello = point(System::Mote, 50_000.0, 3000.0);
    let a = AgainstNative::new(
        &native,
        &point(System::MoteEcho, 80_000.0, 1500.0),
        Some(&hello),
    );
    assert_eq!((a.echo_ratio, a.echo_p99_ratio), (0.8, 1.5));
    assert_eq!(a.hello_ratio, Some(0.5));
    assert!(a.echo_meets_floor);
    assert_eq!(a.hello_meets_floor, Some(true));
    let slow = AgainstNative::new(&native, &point(System::MoteEcho, 79_000.0, 1000.0), None);
    assert!(!slow.echo_meets_floor);
    assert_eq!(slow.hello_meets_floor, None);
    let tail = AgainstNative::new(&native, &point(System::MoteEcho, 90_000.0, 1600.0), None);
    assert!(!tail.echo_meets_floor, "a p99 over 1.5x the native one");

    let mut r = report(vec![hello], vec![]);
    r.native = Some(native);
    r.against_native = Some(a);
    let table = r.table();
    assert!(
        table.contains("| mote, native handler (reference) | 32 | 100000 |"),
        "{table}"
    );
    assert!(
        table.contains("| echo req/s / native | 0.80x | 0.80x | met |"),
        "{table}"
    );
    assert!(
        table.contains("| component req/s / native | 0.50x | 0.50x | met |"),
        "{table}"
    );
}
