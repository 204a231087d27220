//! The process-wide compile cache: one compiled program per (IR, flags), shared by every jitted
//! function whose trace produced that IR.
//!
//! The key is a 128-bit fingerprint of the traced IR — its canonical text (parameter and output types,
//! every equation and its parameters, sub-functions) and the bits of every constant, inline or not,
//! recursively — plus the [`JitOptions`]. Two traces that differ only in the values of a captured
//! array therefore never share code, while re-creating `jit(f)` (e.g. in a loop) traces again but
//! does not recompile. Entries are weak: a program lives as long as some jitted function holds it.

use super::compiled::Compiled;
use super::options::{JitOptions, backend_compile};
use kiln_backend_cpu::CompileError;
use kiln_ir::{Array, Function};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::{Arc, LazyLock, Mutex, Weak};

/// Two independently keyed 64-bit hashes of a function (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Fingerprint(u64, u64);

static KEYS: LazyLock<(RandomState, RandomState)> =
    LazyLock::new(|| (RandomState::new(), RandomState::new()));

type Shared = HashMap<(Fingerprint, JitOptions), Weak<Compiled>>;
static SHARED: LazyLock<Mutex<Shared>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The fingerprint of `f`: equal functions (up to variable numbering and source locations) have
/// equal fingerprints; different ones collide with probability about 2⁻¹²⁸.
pub(crate) fn fingerprint(f: &Function) -> Fingerprint {
    let (text, _) = f.to_text_with_consts();
    let (mut a, mut b) = (KEYS.0.build_hasher(), KEYS.1.build_hasher());
    for h in [&mut a, &mut b] {
        text.hash(h);
        hash_consts(f, h);
    }
    Fingerprint(a.finish(), b.finish())
}

/// Every constant's type and bits, in printing order (a function's own, then its equations' sub-functions).
fn hash_consts(f: &Function, h: &mut impl Hasher) {
    for c in &f.consts {
        hash_array(&c.value, h);
    }
    for e in &f.eqns {
        for sub in e.prim.subfunctions() {
            hash_consts(sub, h);
        }
    }
}

fn hash_array(a: &Array, h: &mut impl Hasher) {
    a.ty().hash(h);
    match a {
        Array::F32(x) => x.iter().for_each(|v| h.write_u32(v.to_bits())),
        Array::F64(x) => x.iter().for_each(|v| h.write_u64(v.to_bits())),
        Array::I32(x) => x.iter().for_each(|v| h.write_i32(*v)),
        Array::U32(x) => x.iter().for_each(|v| h.write_u32(*v)),
        Array::Bool(x) => x.iter().for_each(|v| h.write_u8(u8::from(*v))),
    }
}

/// The compiled program for `f` under `opts`: from the shared cache, else compiled now and shared.
pub(crate) fn compile_shared(f: &Function, opts: &JitOptions) -> Result<Arc<Compiled>, CompileError> {
    let key = (fingerprint(f), *opts);
    let lock = || SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = lock().get(&key).and_then(Weak::upgrade) {
        return Ok(c);
    }
    // Compile without holding the lock: other threads keep using the cache meanwhile (two threads
    // compiling the same program at once both succeed; one result is kept).
    let (exe, simplify) = backend_compile(f, opts)?;
    let compiled = Arc::new(Compiled::new(exe, simplify));
    let mut shared = lock();
    shared.retain(|_, w| w.strong_count() > 0);
    let kept = shared.entry(key).or_default();
    match kept.upgrade() {
        Some(c) => Ok(c),
        None => {
            *kept = Arc::downgrade(&compiled);
            Ok(compiled)
        }
    }
}
