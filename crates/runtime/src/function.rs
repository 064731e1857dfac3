//! A deployed module or component made ready to run: guest kind detected, exports checked and
//! resolved to indices once, imports linked into an `InstancePre` (a `ProxyPre` for a
//! `wasi:http` component). Everything that can be decided at deploy time is decided here, so
//! the call path only instantiates and calls.

use crate::component::{self, ProxyCode, ProxyState};
use crate::error::CompileError;
use crate::host::PROVIDED_MODULES;
use crate::state::CallState;
use mote_types::{GuestKind, abi};
use wasmtime::component::Component;
use wasmtime::{ExternType, FuncType, InstancePre, Linker, Module, ModuleExport, ValType};

/// A compiled, linked function, shared by every executor that runs it.
pub struct Function {
    pub(crate) sha256: String,
    pub(crate) kind: GuestKind,
    pub(crate) code: Code,
    microtask: bool,
    min_memory_bytes: u64,
    resident_bytes: u64,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("sha256", &self.sha256)
            .field("kind", &self.kind)
            .field("resident_bytes", &self.resident_bytes)
            .finish_non_exhaustive()
    }
}

/// What a call instantiates.
pub(crate) enum Code {
    /// A core module and the entry points its kind calls.
    Module {
        pre: InstancePre<CallState>,
        entry: Entry,
    },
    /// A `wasi:http` proxy component.
    Proxy(Box<ProxyCode>),
}

/// The exports a call uses, resolved at deploy time. Every function export here has the type
/// the ABI requires, checked by `detect` against the module: calls rely on this to
/// skip wasmtime's per-call type check.
pub(crate) enum Entry {
    MoteAbi {
        memory: ModuleExport,
        alloc: ModuleExport,
        handle: ModuleExport,
        /// A WASI reactor's `_initialize`, run once per instance before the handler.
        initialize: Option<ModuleExport>,
    },
    WasiCommand {
        start: ModuleExport,
    },
    /// A job module runs on the job engine (`crate::job`), never through a call.
    Job,
}

impl Function {
    pub(crate) fn link(
        linker: &Linker<CallState>,
        module: Module,
        sha256: String,
        microtask: bool,
    ) -> Result<Self, CompileError> {
        let (kind, entry) = detect(&module)?;
        let job = kind == GuestKind::Job;
        if let Some(import) = module.imports().find(|i| {
            !(PROVIDED_MODULES.contains(&i.module()) || job && i.module() == abi::JOB_MODULE)
        }) {
            return Err(CompileError::UnknownImport {
                module: import.module().to_owned(),
                name: import.name().to_owned(),
            });
        }
        let min_memory_bytes = module
            .exports()
            .find_map(|e| match e.ty() {
                ExternType::Memory(m) => Some(m.minimum().saturating_mul(m.page_size())),
                _ => None,
            })
            .unwrap_or(0);
        // Build the copy-on-write memory image (a memfd) now, on the deploying thread, rather
        // than on the first call: executors are confined by seccomp and may not create files.
        module
            .initialize_copy_on_write_image()
            .map_err(|e| CompileError::Link(format!("cannot build the memory image: {e:#}")))?;
        let image = module.image_range();
        let resident_bytes = (image.end as usize - image.start as usize) as u64;
        // A job module is compiled and checked here like any function, but runs on the job
        // engine, which links its `mote_job` imports; here they only need to resolve.
        let mut job_linker;
        let linker = match job {
            true => {
                job_linker = linker.clone();
                job_linker
                    .define_unknown_imports_as_traps(&module)
                    .map_err(|e| CompileError::Link(format!("{e:#}")))?;
                &job_linker
            }
            false => linker,
        };
        let pre = linker.instantiate_pre(&module).map_err(|e| {
            let msg = format!("{e:#}");
            match unknown_import_in(&msg) {
                Some((module, name)) => CompileError::UnknownImport { module, name },
                None => CompileError::Link(msg),
            }
        })?;
        Ok(Self {
            sha256,
            kind,
            code: Code::Module { pre, entry },
            microtask,
            min_memory_bytes,
            resident_bytes,
        })
    }

    /// Checks that `component` is a `wasi:http` proxy and links it.
    pub(crate) fn link_component(
        linker: &wasmtime::component::Linker<ProxyState>,
        component: Component,
        sha256: String,
    ) -> Result<Self, CompileError> {
        let code = component::link(linker, &component)?;
        let image = component.image_range();
        Ok(Self {
            sha256,
            kind: GuestKind::WasiHttp,
            code: Code::Proxy(Box::new(code)),
            microtask: false,
            min_memory_bytes: 0,
            resident_bytes: (image.end as usize - image.start as usize) as u64,
        })
    }

    /// The module and entry points of a core module's call; `None` for a component.
    pub(crate) fn entry(&self) -> Option<&Entry> {
        match &self.code {
            Code::Module { entry, .. } => Some(entry),
            Code::Proxy(_) => None,
        }
    }

    /// The linked component of a `wasi:http` function.
    pub(crate) fn proxy(&self) -> Option<&ProxyCode> {
        match &self.code {
            Code::Proxy(code) => Some(code),
            Code::Module { .. } => None,
        }
    }

    /// Whether it is a `wasi:http` component, whose calls are HTTP requests
    /// ([`crate::Runtime::serve_http`]).
    pub fn is_proxy(&self) -> bool {
        matches!(self.code, Code::Proxy(_))
    }

    /// Lowercase hex sha256 of the module's bytes.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Whether it declares microtasks (imports `mote.phase`, `mote.sleep_us` or an object
    /// function): its calls run through [`crate::Runtime::call_async`].
    pub fn is_microtask(&self) -> bool {
        self.microtask
    }

    /// The detected guest kind.
    pub fn kind(&self) -> GuestKind {
        self.kind
    }

    /// The size of the compiled artefact it keeps mapped (machine code, metadata and data
    /// segments): what keeping it resident costs.
    pub fn resident_bytes(&self) -> u64 {
        self.resident_bytes
    }

    /// The initial size of the module's exported memory, which must fit its memory limit.
    pub fn min_memory_bytes(&self) -> u64 {
        self.min_memory_bytes
    }
}

/// wasmtime reports an import that exists in a provided module but not by that name as
/// "unknown import: `module::name` has not been defined".
fn unknown_import_in(msg: &str) -> Option<(String, String)> {
    let rest = msg.split("unknown import: `").nth(1)?;
    let path = rest.split('`').next()?;
    let (module, name) = path.split_once("::")?;
    Some((module.to_owned(), name.to_owned()))
}

fn detect(module: &Module) -> Result<(GuestKind, Entry), CompileError> {
    if module.get_export(abi::EXPORT_JOB_DRIVER).is_some() {
        export_func(module, abi::EXPORT_JOB_DRIVER, &[], &[], "(func)")?;
        export_func(
            module,
            abi::EXPORT_JOB_TASK,
            &[ValType::I32, ValType::I32],
            &[ValType::I32],
            "(func (param i32 i32) (result i32))",
        )?;
        if !matches!(module.get_export(abi::EXPORT_MEMORY), Some(ExternType::Memory(m)) if !m.is_64())
        {
            return Err(bad_export(
                abi::EXPORT_MEMORY,
                "is missing or not a 32-bit memory",
                "a 32-bit memory",
            ));
        }
        return Ok((GuestKind::Job, Entry::Job));
    }
    if module.get_export(abi::EXPORT_HANDLE).is_some() {
        let handle = export_func(
            module,
            abi::EXPORT_HANDLE,
            &[ValType::I32, ValType::I32],
            &[ValType::I64],
            "(func (param i32 i32) (result i64))",
        )?;
        let alloc = export_func(
            module,
            abi::EXPORT_ALLOC,
            &[ValType::I32],
            &[ValType::I32],
            "(func (param i32) (result i32))",
        )?;
        let memory = match module.get_export(abi::EXPORT_MEMORY) {
            Some(ExternType::Memory(m)) if !m.is_64() => index(module, abi::EXPORT_MEMORY),
            Some(ExternType::Memory(_)) => {
                return Err(bad_export(
                    abi::EXPORT_MEMORY,
                    "is a 64-bit memory",
                    "a 32-bit memory",
                ));
            }
            Some(_) => {
                return Err(bad_export(
                    abi::EXPORT_MEMORY,
                    "is not a memory",
                    "a 32-bit memory",
                ));
            }
            None => {
                return Err(bad_export(
                    abi::EXPORT_MEMORY,
                    "is missing",
                    "a 32-bit memory",
                ));
            }
        };
        let initialize = match module.get_export(abi::EXPORT_INITIALIZE) {
            Some(_) => Some(export_func(
                module,
                abi::EXPORT_INITIALIZE,
                &[],
                &[],
                "(func)",
            )?),
            None => None,
        };
        return Ok((
            GuestKind::MoteAbiV1,
            Entry::MoteAbi {
                memory,
                alloc,
                handle,
                initialize,
            },
        ));
    }
    if module.get_export(abi::EXPORT_START).is_some() {
        let start = export_func(module, abi::EXPORT_START, &[], &[], "(func)")?;
        return Ok((GuestKind::WasiCommand, Entry::WasiCommand { start }));
    }
    let found: Vec<&str> = module.exports().map(|e| e.name()).collect();
    Err(CompileError::NoEntryPoint {
        found: found.join(", "),
    })
}

fn export_func(
    module: &Module,
    name: &'static str,
    params: &[ValType],
    results: &[ValType],
    expected: &'static str,
) -> Result<ModuleExport, CompileError> {
    match module.get_export(name) {
        Some(ExternType::Func(f)) if signature_is(&f, params, results) => Ok(index(module, name)),
        Some(ExternType::Func(f)) => Err(bad_export(name, &format!("has type {f}"), expected)),
        Some(_) => Err(bad_export(name, "is not a function", expected)),
        None => Err(bad_export(name, "is missing", expected)),
    }
}

fn signature_is(f: &FuncType, params: &[ValType], results: &[ValType]) -> bool {
    let same = |a: &mut dyn ExactSizeIterator<Item = ValType>, b: &[ValType]| {
        a.len() == b.len() && a.zip(b).all(|(x, y)| ValType::eq(&x, y))
    };
    same(&mut f.params(), params) && same(&mut f.results(), results)
}

fn index(module: &Module, name: &str) -> ModuleExport {
    module
        .get_export_index(name)
        .expect("get_export found this export a moment ago")
}

fn bad_export(name: &'static str, problem: &str, expected: &'static str) -> CompileError {
    CompileError::BadExport {
        name,
        problem: problem.to_owned(),
        expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls skip wasmtime's type check on these exports (`Entry`), so a wrong type must never
    /// get past `detect`.
    #[test]
    fn every_entry_export_of_the_wrong_type_is_rejected() {
        let engine = wasmtime::Engine::default();
        let abi = |handle: &str, alloc: &str, initialize: &str| {
            format!(
                r#"(module (memory (export "memory") 1)
                (func (export "mote_handle") {handle} unreachable)
                (func (export "mote_alloc") {alloc} unreachable) {initialize})"#
            )
        };
        let good_handle = "(param i32 i32) (result i64)";
        let good_alloc = "(param i32) (result i32)";
        let cases = [
            (
                "mote_handle",
                abi("(param i32) (result i64)", good_alloc, ""),
            ),
            (
                "mote_handle",
                abi("(param i32 i32) (result i32)", good_alloc, ""),
            ),
            (
                "mote_alloc",
                abi(good_handle, "(param i64) (result i32)", ""),
            ),
            ("mote_alloc", abi(good_handle, "(param i32)", "")),
            (
                "_initialize",
                abi(
                    good_handle,
                    good_alloc,
                    r#"(func (export "_initialize") (param i32))"#,
                ),
            ),
            (
                "_start",
                r#"(module (func (export "_start") (result i32) i32.const 0))"#.to_owned(),
            ),
        ];
        for (export, wat) in cases {
            let wasm = wat::parse_str(&wat).expect("the test module is valid");
            let module = Module::new(&engine, wasm).expect("the test module compiles");
            match detect(&module) {
                Err(CompileError::BadExport { name, problem, .. }) => {
                    assert_eq!(name, export, "{wat}");
                    assert!(problem.starts_with("has type"), "{problem}");
                }
                Err(e) => panic!("{export}: expected a bad export, got {e}"),
                Ok(_) => panic!("{export}: a wrong type was accepted: {wat}"),
            }
        }
        let ok = abi(good_handle, good_alloc, r#"(func (export "_initialize"))"#);
        let ok = Module::new(&engine, wat::parse_str(ok).expect("valid")).expect("compiles");
        assert!(detect(&ok).is_ok());
    }

    #[test]
    fn parses_wasmtime_unknown_import_message() {
        let msg = "unknown import: `mote::nope` has not been defined";
        assert_eq!(unknown_import_in(msg), Some(("mote".into(), "nope".into())));
        assert_eq!(unknown_import_in("something else"), None);
    }
}
