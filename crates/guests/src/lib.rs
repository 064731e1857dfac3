//! mote's example guest functions, compiled from `wasm/` to `wasm32-wasip1` by this crate's build
//! script, so no binary is ever committed and tests and `mote up --examples` always run what the
//! sources say.
//!
//! `wasm/` is a separate Cargo workspace (it targets WebAssembly, not the host) holding the guest
//! SDK `mote-sdk`, the examples, and the function suite ([`SUITE`]): eight functions modelled on
//! the SeBS benchmark's, with run times from milliseconds to seconds, for benchmarking schedulers
//! with a realistic mix of calls; `sha512`, the microsecond benchmark's compute-bound guest; and
//! the microtask paper's distributed sort ([`SORT`]), whose functions declare their phases and
//! keep their data in object storage; and the data-parallel jobs of the Canary paper ([`JOBS`],
//! and the [`BUSY`] benchmark), each a module whose driver declares datasets and stages.
//!
//! It also holds `wasi:http/proxy` components ([`COMPONENTS`], in `wasm/http/`): HTTP handlers
//! written against the WASI 0.2 standard instead of the mote ABI, one with the `wasip2` bindings
//! and one with the Spin SDK. They build to `wasm32-wasip1` like the rest, and the build script
//! makes each module a component with wasmtime's proxy adapter, so their `wasm` is a component,
//! not a core module. (`scripts/python-component` and `scripts/js-component` build two more, in
//! Python and JavaScript, which need tools from PyPI and npm and so are not part of this build.)

/// An example function: its name, what it does, and its module's bytes.
pub struct Example {
    /// The name it is deployed under.
    pub name: &'static str,
    /// One line for humans.
    pub about: &'static str,
    /// The WebAssembly module; for [`COMPONENTS`], the component.
    pub wasm: &'static [u8],
}

macro_rules! example {
    ($name:literal, $about:literal) => {
        Example {
            name: $name,
            about: $about,
            wasm: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".wasm")),
        }
    };
}

/// `hello` (mote ABI): answers `Hello, <body>!`, or `Hello, world!` for an empty body.
pub const HELLO: Example = example!("hello", "greets the name in the request body (mote ABI)");
/// `echo` (mote ABI): returns its input unchanged; the trivial function benchmarks use.
pub const ECHO: Example = example!("echo", "returns the request body unchanged (mote ABI)");
/// `wc` (WASI command): counts lines, words and bytes of stdin and prints them as JSON.
pub const WC: Example = example!(
    "wc",
    "counts lines, words and bytes of the request body (WASI command)"
);

/// `ls` (mote ABI, microtasks): lists a bucket of the node's object storage, every key and size
/// (body `bucket` or `bucket/prefix`), paging through listings of any length.
pub const LS: Example = example!(
    "ls",
    "lists the objects of a bucket, `key size` per line (body bucket[/prefix]; mote ABI, microtasks)"
);

/// Every example, in the order `mote up --examples` deploys them.
pub const ALL: [Example; 4] = [HELLO, ECHO, WC, LS];

/// `sha512` (mote ABI): SHA-512 over a 64-byte block `n` times in a chain (body `n=<count>`); the
/// compute-bound guest of the microsecond benchmark's preemption experiment.
pub const SHA512: Example = example!(
    "sha512",
    "chains SHA-512 over a 64-byte block n times (body n=<count>; mote ABI)"
);

/// `sort-gen` (mote ABI, microtasks): writes gensort records `first..first + records` to one
/// object; the sort's input generator.
pub const SORT_GEN: Example = example!(
    "sort-gen",
    "writes gensort records to an object (JSON body; mote ABI, microtasks)"
);
/// `sort-partition` (mote ABI, microtasks): the sort's stage 1, splitting one input object into
/// categories by the first key byte, one object per category.
pub const SORT_PARTITION: Example = example!(
    "sort-partition",
    "sort stage 1: splits an input object into categories by key (JSON body; mote ABI, microtasks)"
);
/// `sort-category` (mote ABI, microtasks): the sort's stage 2, gathering one category's parts
/// and writing them sorted by key as one object.
pub const SORT_CATEGORY: Example = example!(
    "sort-category",
    "sort stage 2: sorts one category's parts into one object (JSON body; mote ABI, microtasks)"
);
/// `sort-validate` (mote ABI, microtasks): checks one sorted object's order, count and valsort
/// checksum.
pub const SORT_VALIDATE: Example = example!(
    "sort-validate",
    "checks a sorted object's order, record count and checksum (JSON body; mote ABI, microtasks)"
);

/// The distributed sort of the microtask paper (`wasm/sort/`), in the order a run calls them:
/// generate the input, partition it (stage 1), sort each category (stage 2), validate. Each
/// function reads and writes with a tenth of a core and computes with a whole one; requests and
/// responses are JSON, documented on each crate. `mote bench sort` runs the whole application.
pub const SORT: [Example; 4] = [SORT_GEN, SORT_PARTITION, SORT_CATEGORY, SORT_VALIDATE];

/// `lr` (job): logistic regression by batch gradient descent, the Canary paper's Figure 2.
pub const LR: Example = example!(
    "lr",
    "logistic regression by batch gradient descent (job; --arg input=BUCKET/PREFIX or generate=N)"
);
/// `kmeans` (job): k-means clustering by Lloyd's algorithm from the input's first `k` points.
pub const KMEANS: Example = example!(
    "kmeans",
    "k-means clustering by Lloyd's algorithm (job; --arg input=BUCKET/PREFIX or generate=N, k=4)"
);
/// `pagerank` (job): PageRank of a SNAP edge list or a generated graph, as networkx computes it.
pub const PAGERANK: Example = example!(
    "pagerank",
    "PageRank of an edge list, as networkx defines it (job; --arg input=BUCKET/PREFIX or generate=V)"
);
/// `wordcount` (job): how often each word occurs in a text, written with the SDK's typed
/// operators (`mote_sdk::job::flow`) in a screenful.
pub const WORDCOUNT: Example = example!(
    "wordcount",
    "how often each word occurs in a text (job; --arg input=BUCKET/PREFIX output=BUCKET/PREFIX)"
);
/// `sales` (job): revenue by country, orders joined with their customers: a small relational
/// query with the SDK's typed operators.
pub const SALES: Example = example!(
    "sales",
    "revenue by country, orders joined with customers (job; --arg orders=… customers=… output=…)"
);
/// `busy` (job): stages of tasks of a chosen length, the Canary paper's scheduling
/// micro-benchmark (Figure 4).
pub const BUSY: Example = example!(
    "busy",
    "stages of busy tasks, a scheduling micro-benchmark (job; --arg stages=1000 work=2000)"
);
/// `wordcount-shuffle` (job): [`WORDCOUNT`] written by hand on the SDK's stages (the load
/// counts, a scatter sends each word's count to its hash's partition), the reference
/// `mote bench jobs --wordcount` measures the typed operators against.
pub const WORDCOUNT_SHUFFLE: Example = example!(
    "wordcount-shuffle",
    "word count with a hand-written shuffle, a benchmark reference (job; --arg input=… output=…)"
);

/// The data-parallel jobs (`wasm/jobs/`, `docs/jobs.md`) `mote up --examples` deploys, each a
/// module whose driver declares its stages; every one reads its input from object storage
/// (`input=BUCKET/PREFIX`; `lr`, `kmeans` and `pagerank` may generate theirs from
/// `generate=… seed=…` instead), and stores its result
/// under `output=BUCKET/PREFIX` if given.
/// [`BUSY`] and [`WORDCOUNT_SHUFFLE`], benchmarks, are not among them.
pub const JOBS: [Example; 5] = [LR, KMEANS, PAGERANK, WORDCOUNT, SALES];

/// `http-hello` (`wasi:http` component): greets on `/` and has routes for testing a host of HTTP
/// components: `/echo` streams the body back, `/status/NNN`, `/stream?bytes=N` (any `u64`),
/// `/sum` (reads the whole body before answering), `/trap`, `/spin` (never returns) and
/// `/fetch?url=URL` (an outgoing request). The crate's doc in `wasm/http/hello` has the details.
pub const HTTP_HELLO: Example = example!(
    "http-hello",
    "greets, or by path echoes, streams, sums, sets a status, traps, spins or fetches (wasi:http \
     component)"
);
/// `http-spin` (`wasi:http` component built with the Spin SDK 5.2): answers
/// `Hello from Spin: <METHOD> <path-and-query>`. It exports `wasi:http/incoming-handler@0.2.0`
/// and imports `wasi:http/types@0.2.6`, older versions than the 0.2.12 of everything else here,
/// which wasmtime's linker accepts as semver-compatible.
pub const HTTP_SPIN: Example = example!(
    "http-spin",
    "greets with the request's method and path (wasi:http component, Spin SDK)"
);

/// The `wasi:http/proxy` components (`wasm/http/`). Each exports `wasi:http/incoming-handler` and
/// imports only interfaces of the proxy world; see the crate doc.
pub const COMPONENTS: [Example; 2] = [HTTP_HELLO, HTTP_SPIN];

/// A function of the suite in `wasm/suite/` (see its README): a mote ABI function modelled on one
/// of the SeBS benchmark's, doing real work on an input it generates from the parameters in the
/// request body (`seed=… size=…`; an empty body means the defaults).
pub struct SuiteFunction {
    /// The name it is deployed under (its package name in `wasm/suite/`).
    pub name: &'static str,
    /// One line for humans: what it does and which SeBS function it models.
    pub about: &'static str,
    /// The WebAssembly module.
    pub wasm: &'static [u8],
    /// The request body of its default workload, spelled out. Sending an empty body does the same
    /// work; `size=` scales it down or up.
    pub default_input: &'static [u8],
}

macro_rules! suite_function {
    ($name:literal, $about:literal, $default_input:literal) => {
        SuiteFunction {
            name: $name,
            about: $about,
            wasm: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".wasm")),
            default_input: $default_input,
        }
    };
}

/// The suite, from the shortest expected run time to the longest. The default inputs aim at half
/// of the run times the SeBS functions have in the paper's Table I, as the benchmark node has half
/// the cores: about 6 ms for each graph function, 10 ms for `dynamic-html`, 60 ms for
/// `thumbnailer`, 400 ms for `compression`, 500 ms for `sleep` and 4 s for `dna-visualisation`.
/// What they measure on the 2-core benchmark machine is in `wasm/suite/README.md`.
pub const SUITE: [SuiteFunction; 8] = [
    suite_function!(
        "graph-bfs",
        "breadth-first search of a Barabási–Albert graph (SeBS 503.graph-bfs)",
        b"seed=42 size=23000"
    ),
    suite_function!(
        "graph-pagerank",
        "PageRank of a Barabási–Albert graph (SeBS 501.graph-pagerank)",
        b"seed=42 size=5000"
    ),
    suite_function!(
        "graph-mst",
        "minimum spanning tree of a weighted Barabási–Albert graph (SeBS 502.graph-mst)",
        b"seed=42 size=9000"
    ),
    suite_function!(
        "dynamic-html",
        "renders an HTML page from a template (SeBS 110.dynamic-html)",
        b"seed=42 size=3500"
    ),
    suite_function!(
        "thumbnailer",
        "shrinks a generated RGB image to a thumbnail (SeBS 210.thumbnailer)",
        b"seed=42 size=2900"
    ),
    suite_function!(
        "compression",
        "deflates and inflates generated text with miniz_oxide (SeBS 311.compression)",
        b"seed=42 size=5120"
    ),
    suite_function!(
        "sleep",
        "sleeps for the requested milliseconds without using the CPU (SeBS 010.sleep)",
        b"ms=500"
    ),
    suite_function!(
        "dna-visualisation",
        "squiggle transform of a DNA sequence, serialised as JSON (SeBS 504.dna-visualisation)",
        b"seed=42 size=10000000"
    ),
];

#[cfg(test)]
mod tests {
    #[test]
    fn every_guest_is_a_webassembly_module() {
        let examples = super::ALL.map(|e| (e.name, e.wasm));
        let suite = super::SUITE.map(|f| (f.name, f.wasm));
        let micro = [(super::SHA512.name, super::SHA512.wasm)];
        let sort = super::SORT.map(|e| (e.name, e.wasm));
        let jobs = [
            super::LR,
            super::KMEANS,
            super::PAGERANK,
            super::BUSY,
            super::WORDCOUNT_SHUFFLE,
        ]
        .map(|e| (e.name, e.wasm));
        for (name, wasm) in examples
            .into_iter()
            .chain(suite)
            .chain(micro)
            .chain(sort)
            .chain(jobs)
        {
            assert!(
                wasm.starts_with(b"\0asm\x01\0\0\0"),
                "{name} is not a core module"
            );
        }
    }

    #[test]
    fn every_http_guest_is_a_component() {
        for example in super::COMPONENTS {
            // A component's preamble: the magic, then version 0xd and layer 1.
            assert!(
                example.wasm.starts_with(b"\0asm\x0d\0\x01\0"),
                "{} is not a component",
                example.name
            );
        }
    }
}
