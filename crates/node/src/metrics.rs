//! The node's Prometheus metrics. Per-function handles are resolved once at deploy time and kept
//! in [`crate::Deployed`], so recording a call is a few atomic operations, not a label lookup.

use mote_runtime::CallError;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// A gauge holding seconds.
pub(crate) type SecondsGauge = Gauge<f64, AtomicU64>;

/// How a call ended, as counted in `mote_invocations_total`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Outcome {
    Ok,
    Trap,
    Timeout,
    MemoryLimit,
    Exit,
    AbiError,
    Rejected,
    Cancelled,
    Internal,
}

impl Outcome {
    /// Every outcome, in index order.
    pub const ALL: [Outcome; 9] = [
        Self::Ok,
        Self::Trap,
        Self::Timeout,
        Self::MemoryLimit,
        Self::Exit,
        Self::AbiError,
        Self::Rejected,
        Self::Cancelled,
        Self::Internal,
    ];

    /// The label value, in Prometheus' snake_case convention.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Trap => "trap",
            Self::Timeout => "timeout",
            Self::MemoryLimit => "memory_limit",
            Self::Exit => "exit",
            Self::AbiError => "abi_error",
            Self::Rejected => "rejected",
            Self::Cancelled => "cancelled",
            Self::Internal => "internal",
        }
    }

    /// The outcome of a failed call.
    pub fn of(e: &CallError) -> Self {
        match e {
            CallError::Trap { .. } => Self::Trap,
            CallError::Timeout { .. } => Self::Timeout,
            CallError::MemoryLimit { .. } => Self::MemoryLimit,
            CallError::Exit { .. } => Self::Exit,
            CallError::Abi(_)
            | CallError::ResponseTooLarge { .. }
            | CallError::Answered(_)
            | CallError::NoResponse => Self::AbiError,
            CallError::Instantiate(_) => Self::Internal,
            CallError::IsJob
            | CallError::IsProxy
            | CallError::NotProxy
            | CallError::BadRequest(_) => Self::Rejected,
        }
    }
}

impl EncodeLabelValue for Outcome {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct InvocationLabels {
    pub function: String,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct FunctionLabels {
    pub function: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabels {
    policy: &'static str,
}

type HistogramFamily = Family<FunctionLabels, Histogram, fn() -> Histogram>;

/// Every metric a node exports.
pub struct NodeMetrics {
    registry: Registry,
    pub(crate) invocations: Family<InvocationLabels, Counter>,
    pub(crate) duration: HistogramFamily,
    pub(crate) queue_length: Gauge,
    pub(crate) busy_executors: Gauge,
    pub(crate) executors: Gauge,
    pub(crate) functions: Gauge,
    pub(crate) quarantined: Gauge,
    pub(crate) resident: Gauge,
    pub(crate) resident_bytes: Gauge,
    pub(crate) cold_starts: Counter,
    pub(crate) expected: Family<FunctionLabels, SecondsGauge>,
    pub(crate) preemptions: Counter,
    pub(crate) preemptions_refused: Counter,
    pub(crate) suspended_calls: Gauge,
    pub(crate) inline_calls: Counter,
    policy: Family<PolicyLabels, Gauge>,
}

fn duration_histogram() -> Histogram {
    // 10 µs to ~40 s: mote's calls run for microseconds to seconds.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        1e-5, 4.0, 12,
    ))
}

impl NodeMetrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("mote");
        let invocations = Family::<InvocationLabels, Counter>::default();
        let duration: HistogramFamily = Family::new_with_constructor(duration_histogram);
        let queue_length = Gauge::default();
        let busy_executors = Gauge::default();
        let executors = Gauge::default();
        let functions = Gauge::default();
        let quarantined = Gauge::default();
        let resident = Gauge::default();
        let resident_bytes = Gauge::default();
        let cold_starts = Counter::default();
        let expected = Family::<FunctionLabels, SecondsGauge>::default();
        let policy = Family::<PolicyLabels, Gauge>::default();
        let preemptions = Counter::default();
        let preemptions_refused = Counter::default();
        let suspended_calls = Gauge::default();
        let inline_calls = Counter::default();
        registry.register(
            "invocations",
            "Calls by function and outcome",
            invocations.clone(),
        );
        registry.register(
            "call_duration_seconds",
            "Time calls spent running on an executor, by function (queueing excluded)",
            duration.clone(),
        );
        registry.register(
            "queue_length",
            "Calls waiting for an executor",
            queue_length.clone(),
        );
        registry.register(
            "executors_busy",
            "Cores held by a running call (or its teardown), on an executor or where the call was read",
            busy_executors.clone(),
        );
        registry.register(
            "executors",
            "Executor threads (one per core; more under baseline and --preempt on)",
            executors.clone(),
        );
        registry.register(
            "functions_deployed",
            "Functions deployed on this node",
            functions.clone(),
        );
        registry.register(
            "functions_quarantined",
            "Functions refusing calls after too many budget kills in a row",
            quarantined.clone(),
        );
        registry.register(
            "functions_resident",
            "Functions whose compiled code is mapped and linked, so a call is a warm start",
            resident.clone(),
        );
        registry.register(
            "resident_bytes",
            "Bytes of compiled code the resident functions keep mapped (bounded by --resident-mb)",
            resident_bytes.clone(),
        );
        registry.register(
            "cold_starts",
            "Calls that had to load their function's artefact from disk first",
            cold_starts.clone(),
        );
        registry.register(
            "expected_processing_seconds",
            "Mean of the function's last 10 processing times on this node, which the policies rank by",
            expected.clone(),
        );
        registry.register(
            "preemptions",
            "Running calls suspended for a better-ranked waiting call (--preempt on)",
            preemptions.clone(),
        );
        registry.register(
            "preemptions_refused",
            "Preemptions not made because --max-suspended calls were already suspended",
            preemptions_refused.clone(),
        );
        registry.register(
            "suspended_calls",
            "Calls suspended now, each holding its instance (at most --max-suspended)",
            suspended_calls.clone(),
        );
        registry.register(
            "inline_calls",
            "Calls run on the thread that read them, on a free core, without queueing (--inline)",
            inline_calls.clone(),
        );
        registry.register(
            "policy",
            "The scheduling policy the node runs (value 1)",
            policy.clone(),
        );
        Self {
            registry,
            invocations,
            duration,
            queue_length,
            busy_executors,
            executors,
            functions,
            quarantined,
            resident,
            resident_bytes,
            cold_starts,
            expected,
            preemptions,
            preemptions_refused,
            suspended_calls,
            inline_calls,
            policy,
        }
    }

    pub(crate) fn set_policy(&self, policy: mote_sched::Policy) {
        self.policy
            .get_or_create(&PolicyLabels {
                policy: policy.as_str(),
            })
            .set(1);
    }

    /// Renders every metric in the Prometheus text format.
    pub fn encode(&self) -> String {
        self.encode_with(|_| {})
    }

    /// Renders every metric in the Prometheus text format, with what `more` writes (other
    /// parts' metrics, without an end marker) after the node's own.
    pub fn encode_with(&self, more: impl FnOnce(&mut String)) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut out = String::new();
        encode_registry(&mut out, &self.registry).expect("writing to a String cannot fail");
        more(&mut out);
        encode_eof(&mut out).expect("writing to a String cannot fail");
        out
    }
}
