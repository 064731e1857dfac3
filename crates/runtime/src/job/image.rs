//! A job instance's state between tasks as an image (`mote_jobs::image`, which owns the byte
//! format): its linear memory and exported mutable globals, captured for a snapshot or a
//! partition's move and restored into a fresh instance of the same module.

use super::JobInstance;
use crate::error::JobError;
use crate::state::JobState;
use mote_jobs::image;
use wasmtime::Val;

impl JobInstance {
    /// Its state between tasks, which [`JobEngine::restore`](super::JobEngine::restore) brings
    /// back: the linear memory and the exported mutable globals. Between tasks a guest's other
    /// globals (its stack pointer) are back where instantiation put them, so this is all of it.
    pub fn image(&mut self) -> Vec<u8> {
        let mut globals = Vec::new();
        let exports: Vec<(String, wasmtime::Global)> = self
            .instance
            .exports(&mut self.store)
            .filter_map(|e| {
                let name = e.name().to_owned();
                e.into_global().map(|g| (name, g))
            })
            .collect();
        for (name, global) in exports {
            if global.ty(&self.store).mutability() == wasmtime::Mutability::Var
                && let Some(value) = image_value(global.get(&mut self.store))
            {
                globals.push((name, value));
            }
        }
        let memory = self.memory.map_or(&[][..], |m| m.data(&self.store));
        image::encode(&globals, memory)
    }

    /// Overwrites a fresh instance's memory and exported globals with an image's.
    pub fn load_image(&mut self, image: &[u8]) -> Result<(), JobError> {
        let image::Image {
            globals,
            memory: bytes,
        } = image::decode(image).map_err(|e| JobError::Image(e.to_string()))?;
        let store = &mut self.store;
        for (name, value) in globals {
            let value = wasm_value(value);
            let Some(global) = self.instance.get_global(&mut *store, &name) else {
                return Err(JobError::Image(format!(
                    "the module exports no global `{name}`"
                )));
            };
            global
                .set(&mut *store, value)
                .map_err(|e| JobError::Image(format!("global `{name}`: {e}")))?;
        }
        match self.memory {
            Some(memory) => {
                let have = memory.data_size(&*store);
                if bytes.len() > have {
                    let pages = (bytes.len() - have).div_ceil(WASM_PAGE);
                    memory
                        .grow(&mut *store, pages as u64)
                        .map_err(|_| classify_grow(store.data(), bytes.len()))?;
                }
                memory.data_mut(&mut *store)[..bytes.len()].copy_from_slice(bytes);
            }
            None if bytes.is_empty() => {}
            None => return Err(JobError::Image("the module exports no memory".into())),
        }
        Ok(())
    }
}

const WASM_PAGE: usize = 65536;

/// A restored memory of `wanted` bytes that the instance's limit refused.
fn classify_grow(state: &JobState, wanted: usize) -> JobError {
    JobError::MemoryLimit {
        memory_mb: state.ctx.limits.memory_mb,
        asked_mb: wanted.div_ceil(1 << 20),
    }
}

/// A global's value in the image format (`mote_jobs::image`), if it is a number: references
/// cannot be saved, and a job module's state is its memory and numbers.
fn image_value(value: Val) -> Option<image::Value> {
    Some(match value {
        Val::I32(v) => image::Value::I32(v),
        Val::I64(v) => image::Value::I64(v),
        Val::F32(v) => image::Value::F32(v),
        Val::F64(v) => image::Value::F64(v),
        Val::V128(v) => image::Value::V128(v.as_u128()),
        _ => return None,
    })
}

fn wasm_value(value: image::Value) -> Val {
    match value {
        image::Value::I32(v) => Val::I32(v),
        image::Value::I64(v) => Val::I64(v),
        image::Value::F32(v) => Val::F32(v),
        image::Value::F64(v) => Val::F64(v),
        image::Value::V128(v) => Val::V128(v.into()),
    }
}
