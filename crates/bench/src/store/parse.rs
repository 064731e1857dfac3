//! Reading what etcd's `benchmark` tool prints at the end of a run: its summary, latency
//! percentiles and errors.

use serde::Serialize;

/// What `benchmark` printed at the end of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BenchSummary {
    /// Successful requests per second over the run (`Requests/sec`).
    pub requests_per_s: f64,
    /// The run's length in seconds (`Total`).
    pub total_s: f64,
    /// Latencies in milliseconds.
    pub fastest_ms: f64,
    /// The slowest request, ms.
    pub slowest_ms: f64,
    /// The mean, ms.
    pub average_ms: f64,
    /// The standard deviation, ms.
    pub stddev_ms: f64,
    /// The latency distribution: (percentile, ms), as printed (10, 25, 50, 75, 90, 95, 99,
    /// 99.9).
    pub percentiles: Vec<(f64, f64)>,
    /// Failed requests (the `Error distribution` section), with their messages.
    pub errors: u64,
    /// The distinct error messages.
    pub error_messages: Vec<String>,
}

/// Why `benchmark`'s output could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    /// The output has no `Requests/sec` line: every request failed, or the tool did not run.
    #[error("benchmark printed no summary (no `Requests/sec` line){}", errors_suffix(.0))]
    NoSummary(Vec<String>),
    /// A number could not be read.
    #[error("cannot read the number in benchmark's line `{0}`")]
    BadNumber(String),
}

fn errors_suffix(errors: &[String]) -> String {
    match errors.is_empty() {
        true => String::new(),
        false => format!("; its errors: {}", errors.join("; ")),
    }
}

impl BenchSummary {
    /// Reads the summary `benchmark` prints on stdout: the `Summary:` block (times in seconds),
    /// the `Latency distribution:` block (`10% in 0.0118 secs.`, or `in 11.8 ms.` in newer
    /// versions) and the `Error distribution:` block (`[count]<TAB>message`), ignoring the
    /// histogram and anything else.
    pub fn parse(output: &str) -> Result<Self, ParseError> {
        let mut summary = BenchSummary::default();
        let mut have_rate = false;
        let mut in_errors = false;
        for line in output.lines() {
            let line = line.trim();
            if line.is_empty() {
                in_errors = false;
                continue;
            }
            if line == "Error distribution:" {
                in_errors = true;
                continue;
            }
            if in_errors {
                if let Some((count, message)) =
                    line.strip_prefix('[').and_then(|rest| rest.split_once(']'))
                {
                    let count: u64 = count
                        .parse()
                        .map_err(|_| ParseError::BadNumber(line.into()))?;
                    summary.errors += count;
                    summary
                        .error_messages
                        .push(format!("{count} x {}", message.trim()));
                }
                continue;
            }
            if let Some((key, value)) = line.split_once(':') {
                let seconds = || seconds(value).ok_or_else(|| ParseError::BadNumber(line.into()));
                match key {
                    "Total" => summary.total_s = seconds()?,
                    "Slowest" => summary.slowest_ms = seconds()? * 1e3,
                    "Fastest" => summary.fastest_ms = seconds()? * 1e3,
                    "Average" => summary.average_ms = seconds()? * 1e3,
                    "Stddev" => summary.stddev_ms = seconds()? * 1e3,
                    "Requests/sec" => {
                        summary.requests_per_s = value
                            .trim()
                            .parse()
                            .map_err(|_| ParseError::BadNumber(line.into()))?;
                        have_rate = true;
                    }
                    _ => {}
                }
                continue;
            }
            if let Some((pct, latency)) = line.split_once("% in ") {
                let (Ok(pct), Some(ms)) = (pct.parse::<f64>(), latency_ms(latency)) else {
                    return Err(ParseError::BadNumber(line.into()));
                };
                summary.percentiles.push((pct, ms));
            }
        }
        if !have_rate {
            return Err(ParseError::NoSummary(summary.error_messages));
        }
        Ok(summary)
    }

    /// The latency at `pct` percent, in ms, if it was printed (the tool omits zeros).
    pub fn percentile_ms(&self, pct: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|(p, _)| (p - pct).abs() < 1e-9)
            .map(|&(_, ms)| ms)
    }
}

/// `0.0118 secs.` → 0.0118.
fn seconds(text: &str) -> Option<f64> {
    text.trim().strip_suffix("secs.")?.trim().parse().ok()
}

/// `0.0118 secs.` or `11.8 ms.` → milliseconds.
fn latency_ms(text: &str) -> Option<f64> {
    let text = text.trim().trim_end_matches('.');
    if let Some(ms) = text.strip_suffix("ms") {
        ms.trim().parse().ok()
    } else {
        Some(text.strip_suffix("secs")?.trim().parse::<f64>().ok()? * 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What etcd 3.6.8's `benchmark --precise put` prints on stdout (histogram shortened).
    const PUT_OUTPUT: &str = "
Summary:
  Total:\t1.9391 secs.
  Slowest:\t0.1908 secs.
  Fastest:\t2.3e-03 secs.
  Average:\t0.0374 secs.
  Stddev:\t0.0338 secs.
  Requests/sec:\t2578.4574

Response time histogram:
  0.0023 [1]\t|
  0.0212 [1990]\t|∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎

Latency distribution:
  10% in 0.0118 secs.
  25% in 0.0167 secs.
  50% in 0.0242 secs.
  75% in 0.0420 secs.
  90% in 0.0872 secs.
  95% in 0.1074 secs.
  99% in 0.1747 secs.
  99.9% in 0.1907 secs.
";

    #[test]
    fn parses_benchmarks_summary() {
        let s = BenchSummary::parse(PUT_OUTPUT).unwrap();
        assert_eq!(s.requests_per_s, 2578.4574);
        assert_eq!(s.total_s, 1.9391);
        assert!((s.fastest_ms - 2.3).abs() < 1e-9);
        assert!((s.slowest_ms - 190.8).abs() < 1e-9);
        assert_eq!(s.percentiles.len(), 8);
        assert!((s.percentile_ms(10.0).unwrap() - 11.8).abs() < 1e-9);
        assert!((s.percentile_ms(50.0).unwrap() - 24.2).abs() < 1e-9);
        assert!((s.percentile_ms(99.9).unwrap() - 190.7).abs() < 1e-9);
        assert_eq!(s.percentile_ms(42.0), None);
        assert_eq!(s.errors, 0);
    }

    #[test]
    fn parses_millisecond_latencies_and_errors() {
        let output = "bench with serializable range\n\nSummary:\n  Total:\t2 secs.\n  Requests/sec:\t450\n\nLatency distribution:\n  50% in 1.250 ms.\n\nError distribution:\n  [100]\trpc error: code = Unavailable desc = connection refused\n  [2]\tcontext deadline exceeded\n";
        let s = BenchSummary::parse(output).unwrap();
        assert_eq!(s.requests_per_s, 450.0);
        assert_eq!(s.percentile_ms(50.0), Some(1.25));
        assert_eq!(s.errors, 102);
        assert_eq!(s.error_messages[1], "2 x context deadline exceeded");
    }

    #[test]
    fn a_run_where_everything_failed_has_no_summary() {
        let output = "\nError distribution:\n  [5]\tetcdserver: too many requests\n";
        let err = BenchSummary::parse(output).unwrap_err();
        assert_eq!(
            err,
            ParseError::NoSummary(vec!["5 x etcdserver: too many requests".into()])
        );
        assert!(err.to_string().contains("too many requests"), "{err}");
        assert!(matches!(
            BenchSummary::parse("Summary:\n  Requests/sec:\tlots\n"),
            Err(ParseError::BadNumber(_))
        ));
        assert!(matches!(
            BenchSummary::parse(""),
            Err(ParseError::NoSummary(_))
        ));
    }
}
