//! Splitting a kernel's output rows over rayon threads.
//!
//! Pools are shared process-wide by thread count while any executable holds one: building a pool
//! spawns its threads (hundreds of µs), far too slow to do per executable. The last executable
//! using a pool takes its threads down with it, so a program that compiles with many different
//! counts does not keep every pool alive.

use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The most threads a pool gets: a larger [`CompileOptions::threads`](crate::CompileOptions::threads)
/// is clamped to it. Each thread reserves its stack's address space and a guard page; 20,000 made
/// the OS refuse a thread's guard page inside rayon's spawn, which aborts the process.
pub(crate) const MAX_POOL_THREADS: usize = 256;

/// Where parallel kernel steps run.
#[derive(Clone)]
pub(crate) enum Threads {
    /// Never spawn: every kernel runs on the calling thread.
    Serial,
    /// rayon's global pool.
    Global,
    /// A shared pool of a fixed size (at least 2).
    Pool(Arc<rayon::ThreadPool>),
}

/// The process-wide pools, by thread count, while some executable holds them.
static POOLS: OnceLock<Mutex<HashMap<usize, Weak<rayon::ThreadPool>>>> = OnceLock::new();

impl Threads {
    /// `threads` as in [`CompileOptions::threads`](crate::CompileOptions::threads), at most
    /// [`MAX_POOL_THREADS`]. A pool that cannot be built (the OS refused threads) degrades to
    /// serial execution, never to an error.
    pub(crate) fn new(threads: Option<usize>) -> Threads {
        match threads.map(|n| n.min(MAX_POOL_THREADS)) {
            None | Some(0) => Threads::Global,
            Some(1) => Threads::Serial,
            Some(n) => {
                let pools = POOLS.get_or_init(Default::default);
                let mut pools = pools.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(p) = pools.get(&n).and_then(Weak::upgrade) {
                    return Threads::Pool(p);
                }
                // Forget the pools nobody holds any more (their threads are exiting).
                pools.retain(|_, p| p.strong_count() > 0);
                match rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .thread_name(move |i| format!("kiln-{n}-{i}"))
                    .build()
                {
                    Ok(p) => {
                        let p = Arc::new(p);
                        pools.insert(n, Arc::downgrade(&p));
                        Threads::Pool(p)
                    }
                    Err(_) => Threads::Serial,
                }
            }
        }
    }

    /// How many threads a step may use.
    pub(crate) fn count(&self) -> usize {
        match self {
            Threads::Serial => 1,
            Threads::Global => rayon::current_num_threads(),
            Threads::Pool(p) => p.current_num_threads(),
        }
    }

    /// Runs `f` on a thread of the pool, the caller waiting (on the calling thread when serial, or
    /// when it is a thread of any rayon pool already: then each step's `for_rows` runs as before,
    /// in this pool, and the gain below does not apply). An executable with parallel steps runs whole calls this
    /// way: each step's ranges are then split by a pool thread, which runs one range itself and
    /// takes back any range no other thread has started, instead of the caller handing every range
    /// to the pool and sleeping until the last one ends. On the 100 k-agent epidemic day (about ten
    /// parallel steps of 0.1–0.5 ms) the two thread switches per step were ~10 % of the time.
    pub(crate) fn run_in_pool<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match self {
            Threads::Serial => f(),
            _ if rayon::current_thread_index().is_some() => f(),
            Threads::Global => rayon::scope(|_| f()),
            Threads::Pool(p) => p.install(f),
        }
    }

    /// Runs `a` on this thread and offers `b` to the other threads of the pool (rayon's `join`:
    /// if none takes it, this thread runs it after `a`, or when `a` calls `rayon::yield_local`);
    /// returns when both are done. Serial: `a`, then `b`, so `a` must not wait for `b` there
    /// (the pipeline runs only with two threads or more).
    pub(crate) fn join(&self, a: impl FnOnce() + Send, b: impl FnOnce() + Send) {
        match self {
            Threads::Serial => {
                a();
                b();
            }
            Threads::Global => _ = rayon::join(a, b),
            Threads::Pool(p) => _ = p.join(a, b),
        }
    }

    /// Calls `f(lo, hi)` on `chunks` contiguous, disjoint row ranges covering `0..rows`, in parallel
    /// where `chunks > 1`. Which thread runs which range never changes what a range computes.
    pub(crate) fn for_rows(&self, rows: i64, chunks: usize, f: &(dyn Fn(i64, i64) + Sync)) {
        let chunks = chunks.clamp(1, rows.max(1) as usize) as i64;
        let range = |c: i64| (rows * c / chunks, rows * (c + 1) / chunks);
        let each = |c: i64| {
            let (lo, hi) = range(c);
            f(lo, hi)
        };
        match self {
            _ if chunks == 1 => f(0, rows),
            Threads::Serial => (0..chunks).for_each(each),
            Threads::Global => (0..chunks).into_par_iter().for_each(each),
            Threads::Pool(p) => p.install(|| (0..chunks).into_par_iter().for_each(each)),
        }
    }
}
