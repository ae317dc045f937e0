//! The crate's only `unsafe`: running a kernel with the CPU's 256-bit
//! vector instructions when it has them.
//!
//! The kernels are safe Rust written so the compiler vectorizes them
//! (independent lanes, fixed trip counts). Built for the baseline x86-64
//! target they get 128-bit SSE2; [`with_avx2`] runs the same code compiled
//! with AVX2 enabled, twice the lanes, after checking at run time that the
//! CPU has AVX2. Elsewhere it just runs the code.

/// Runs `kernel` compiled with AVX2 where the CPU has it. The kernel and
/// what it calls must be `#[inline(always)]` to be compiled that way.
#[inline(always)]
pub(crate) fn with_avx2<R>(kernel: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        fn avx2<R>(kernel: impl FnOnce() -> R) -> R {
            kernel()
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: a `target_feature` function is unsafe to call only
            // because the CPU running it might lack the feature; this CPU
            // has AVX2, checked just above. The kernel itself is safe code.
            #[allow(unsafe_code)]
            return unsafe { avx2(kernel) };
        }
    }
    kernel()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_the_kernel_once_and_returns_its_result() {
        let mut runs = 0;
        let sum = with_avx2(|| {
            runs += 1;
            (1..=100u64).sum::<u64>()
        });
        assert_eq!((sum, runs), (5050, 1));
    }
}
