//! Threefry-2x32 (20 rounds) as plain integer code — JAX's `threefry2x32_p`, bit for bit.

const ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];

#[inline(always)]
fn block(k0: u32, k1: u32, x0: u32, x1: u32) -> (u32, u32) {
    let ks = [k0, k1, k0 ^ k1 ^ 0x1BD1_1BDA];
    let mut x = [x0.wrapping_add(ks[0]), x1.wrapping_add(ks[1])];
    for group in 0..5 {
        for &r in &ROTATIONS[group % 2] {
            x[0] = x[0].wrapping_add(x[1]);
            x[1] = x[1].rotate_left(r) ^ x[0];
        }
        let injection = group + 1;
        x[0] = x[0].wrapping_add(ks[injection % 3]);
        x[1] = x[1].wrapping_add(ks[(injection + 1) % 3]).wrapping_add(injection as u32);
    }
    (x[0], x[1])
}

/// Elements `lo..hi`; buffers are passed as addresses so parallel ranges may share them. The loop
/// is compiled for the best instruction set this CPU has ([`crate::vmath::Level`]): the compiler
/// vectorizes it, and AVX-512's 16 lanes and rotate instruction beat the 4-lane SSE2 shifts of the
/// baseline build (the per-agent draws were 7 % of the epidemic day at 10⁶ agents). Integer
/// arithmetic only, so every level gives the same bits.
///
/// # Safety
/// Each address is of at least `hi` u32s; the outputs do not overlap the inputs.
pub(crate) unsafe fn run(lo: usize, hi: usize, ins: [usize; 4], outs: [usize; 2]) {
    use crate::vmath::Level;
    // SAFETY (all arms): per the contract; the level's features are present (the vmath table's
    // level is the best this CPU supports).
    match crate::vmath::table().level {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => unsafe { run_avx512(lo, hi, ins, outs) },
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => unsafe { run_avx2(lo, hi, ins, outs) },
        _ => unsafe { run_any(lo, hi, ins, outs) },
    }
}

/// [`run_any`] compiled with AVX-512.
///
/// # Safety
/// As [`run`], on a CPU with these features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2")]
unsafe fn run_avx512(lo: usize, hi: usize, ins: [usize; 4], outs: [usize; 2]) {
    unsafe { run_any(lo, hi, ins, outs) }
}

/// [`run_any`] compiled with AVX2.
///
/// # Safety
/// As [`run`], on a CPU with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn run_avx2(lo: usize, hi: usize, ins: [usize; 4], outs: [usize; 2]) {
    unsafe { run_any(lo, hi, ins, outs) }
}

/// The loop, inlined into each level's function so that it is compiled with that level's features.
///
/// # Safety
/// As [`run`].
#[inline(always)]
unsafe fn run_any(lo: usize, hi: usize, ins: [usize; 4], outs: [usize; 2]) {
    let ins = ins.map(|a| a as *const u32);
    let outs = outs.map(|a| a as *mut u32);
    for i in lo..hi {
        // SAFETY: i < hi, per the contract.
        unsafe {
            let (y0, y1) = block(*ins[0].add(i), *ins[1].add(i), *ins[2].add(i), *ins[3].add(i));
            *outs[0].add(i) = y0;
            *outs[1].add(i) = y1;
        }
    }
}
