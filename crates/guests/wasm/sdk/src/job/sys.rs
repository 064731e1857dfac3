//! The `mote_job` imports, converted to Rust types.

#[link(wasm_import_module = "mote_job")]
unsafe extern "C" {
    #[link_name = mote_abi::import_name!(dataset)]
    fn mote_dataset(name_ptr: i32, name_len: i32, partitioned: i32) -> i32;
    #[link_name = mote_abi::import_name!(compute)]
    fn mote_compute(func: i32, reads_ptr: i32, reads_len: i32, writes_ptr: i32, writes_len: i32);
    #[link_name = mote_abi::import_name!(scatter)]
    fn mote_scatter(
        func: i32,
        reads_ptr: i32,
        reads_len: i32,
        gather: i32,
        writes_ptr: i32,
        writes_len: i32,
    );
    #[link_name = mote_abi::import_name!(load)]
    fn mote_load(func: i32, dataset: i32, arg_ptr: i32, arg_len: i32);
    #[link_name = mote_abi::import_name!(store)]
    fn mote_store(func: i32, dataset: i32, arg_ptr: i32, arg_len: i32);
    #[link_name = mote_abi::import_name!(repeat)]
    fn mote_repeat(times: i32);
    #[link_name = mote_abi::import_name!(while_signal)]
    fn mote_while_signal(func: i32, dataset: i32);
    #[link_name = mote_abi::import_name!(if_signal)]
    fn mote_if_signal(func: i32, dataset: i32);
    #[link_name = mote_abi::import_name!(else_branch)]
    fn mote_else_branch();
    #[link_name = mote_abi::import_name!(end)]
    fn mote_end();
    #[link_name = mote_abi::import_name!(partitions)]
    fn mote_partitions() -> i32;
    #[link_name = mote_abi::import_name!(arg)]
    fn mote_arg(key_ptr: i32, key_len: i32, out_ptr: i32, out_cap: i32) -> i32;
    #[link_name = mote_abi::import_name!(input_count)]
    fn mote_input_count() -> i32;
    #[link_name = mote_abi::import_name!(input_len)]
    fn mote_input_len(k: i32) -> i32;
    #[link_name = mote_abi::import_name!(input_read)]
    fn mote_input_read(k: i32, ptr: i32);
    #[link_name = mote_abi::import_name!(emit)]
    fn mote_emit(dest: i32, ptr: i32, len: i32);
    #[link_name = mote_abi::import_name!(task_dataset)]
    fn mote_task_dataset(which: i32, k: i32, out_ptr: i32, out_cap: i32) -> i32;
}

// SAFETY (every call below): the imports take plain values, and read or write only the
// bytes at the pointers they are given, up to the lengths they are given, which are live for
// the call. Guest memory is 32-bit, so pointers and lengths fit an i32.

fn bytes(b: &[u8]) -> (i32, i32) {
    (b.as_ptr() as i32, b.len() as i32)
}

fn ids(ids: &[i32]) -> (i32, i32) {
    (ids.as_ptr() as i32, ids.len() as i32)
}

pub fn dataset(name: &str, partitioned: bool) -> i32 {
    let (ptr, len) = bytes(name.as_bytes());
    // SAFETY: see above.
    unsafe { mote_dataset(ptr, len, i32::from(partitioned)) }
}

pub fn compute(func: i32, reads: &[i32], writes: &[i32]) {
    let (reads_ptr, reads_len) = ids(reads);
    let (writes_ptr, writes_len) = ids(writes);
    // SAFETY: see above.
    unsafe { mote_compute(func, reads_ptr, reads_len, writes_ptr, writes_len) }
}

pub fn scatter(func: i32, reads: &[i32], gather: i32, writes: &[i32]) {
    let (reads_ptr, reads_len) = ids(reads);
    let (writes_ptr, writes_len) = ids(writes);
    // SAFETY: see above.
    unsafe { mote_scatter(func, reads_ptr, reads_len, gather, writes_ptr, writes_len) }
}

pub fn load(func: i32, dataset: i32, arg: &str) {
    let (ptr, len) = bytes(arg.as_bytes());
    // SAFETY: see above.
    unsafe { mote_load(func, dataset, ptr, len) }
}

pub fn store(func: i32, dataset: i32, arg: &str) {
    let (ptr, len) = bytes(arg.as_bytes());
    // SAFETY: see above.
    unsafe { mote_store(func, dataset, ptr, len) }
}

pub fn repeat(times: i32) {
    // SAFETY: see above.
    unsafe { mote_repeat(times) }
}

pub fn while_signal(func: i32, dataset: i32) {
    // SAFETY: see above.
    unsafe { mote_while_signal(func, dataset) }
}

pub fn if_signal(func: i32, dataset: i32) {
    // SAFETY: see above.
    unsafe { mote_if_signal(func, dataset) }
}

pub fn else_branch() {
    // SAFETY: see above.
    unsafe { mote_else_branch() }
}

pub fn end() {
    // SAFETY: see above.
    unsafe { mote_end() }
}

pub fn partitions() -> i32 {
    // SAFETY: see above.
    unsafe { mote_partitions() }
}

pub fn arg(key: &str) -> Option<Vec<u8>> {
    let (key_ptr, key_len) = bytes(key.as_bytes());
    let mut out = Vec::new();
    loop {
        let (out_ptr, out_cap) = (out.as_mut_ptr() as i32, out.capacity() as i32);
        // SAFETY: see above; the host writes at most `out_cap` bytes.
        let len = unsafe { mote_arg(key_ptr, key_len, out_ptr, out_cap) };
        let len = usize::try_from(len).ok()?;
        if len <= out.capacity() {
            // SAFETY: the host wrote the value's `len` bytes, as they fit.
            unsafe { out.set_len(len) };
            return Some(out);
        }
        out.reserve_exact(len);
    }
}

pub fn input_count() -> i32 {
    // SAFETY: see above.
    unsafe { mote_input_count() }
}

pub fn input(k: i32) -> Vec<u8> {
    // SAFETY: see above.
    let len = unsafe { mote_input_len(k) };
    let len = usize::try_from(len).expect("an input's length is not negative");
    let mut out = Vec::<u8>::with_capacity(len);
    // SAFETY: the host writes exactly `input_len(k)` bytes, the buffer's capacity.
    unsafe {
        mote_input_read(k, out.as_mut_ptr() as i32);
        out.set_len(len);
    }
    out
}

/// Input `k` in a shared buffer of its own, written there by the host: no copy from a `Vec`.
pub fn input_shared(k: i32) -> std::rc::Rc<[u8]> {
    // SAFETY: see above.
    let len = unsafe { mote_input_len(k) };
    let len = usize::try_from(len).expect("an input's length is not negative");
    let mut buffer = std::rc::Rc::<[u8]>::new_uninit_slice(len);
    let ptr = std::rc::Rc::get_mut(&mut buffer).expect("a new Rc is not shared");
    // SAFETY: the host writes exactly `input_len(k)` bytes, the buffer's length, so that every
    // byte is initialized before `assume_init`.
    unsafe {
        mote_input_read(k, ptr.as_mut_ptr() as i32);
        buffer.assume_init()
    }
}

pub fn emit(dest: i32, data: &[u8]) {
    let (ptr, len) = bytes(data);
    // SAFETY: see above.
    unsafe { mote_emit(dest, ptr, len) }
}

/// The name of the `k`th dataset the running task's stage reads (`which` 0) or writes (1).
pub fn task_dataset(which: i32, k: usize) -> Option<String> {
    let k = i32::try_from(k).ok()?;
    let mut out = Vec::<u8>::with_capacity(32);
    loop {
        // SAFETY: see above; the host writes the name only if it fits the capacity given.
        let len =
            unsafe { mote_task_dataset(which, k, out.as_mut_ptr() as i32, out.capacity() as i32) };
        let len = usize::try_from(len).ok()?;
        if len <= out.capacity() {
            // SAFETY: the host wrote `len` bytes, within the capacity.
            unsafe { out.set_len(len) };
            return Some(String::from_utf8(out).expect("dataset names are UTF-8"));
        }
        out.reserve_exact(len);
    }
}
