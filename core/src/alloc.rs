//! Process allocator tuning for tensor workloads.
//!
//! candle allocates a fresh buffer for every intermediate tensor. glibc's malloc serves blocks
//! above its mmap threshold (128 KiB, rising dynamically up to 32 MiB) with `mmap` and hands
//! them back with `munmap` when freed, and trims the heap top above 128 KiB of free space. A
//! training step of the shipped 1 M-parameter dLLM allocates the same few-MiB activations
//! every step, so each step touches fresh pages: measured here 13 600 minor page faults per
//! second and 29% of the step's CPU time in the kernel. Keeping freed memory in the heap makes
//! the next step reuse those pages.

/// The mmap threshold set by [`keep_freed_memory`]: glibc's largest (32 MiB on 64-bit), so
/// every block up to that size comes from the reusable heap.
pub const MMAP_THRESHOLD: usize = 32 << 20;
/// Extra heap grown per `sbrk` by [`keep_freed_memory`] (64 MiB).
pub const TOP_PAD: usize = 64 << 20;

/// The memory the kernel says a new allocation can get without swapping (`MemAvailable` of
/// `/proc/meminfo`), in bytes; `None` where that file is not there or does not say.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Tells glibc's malloc to keep freed memory for reuse instead of returning it to the kernel:
/// `M_MMAP_THRESHOLD` = [`MMAP_THRESHOLD`], `M_TRIM_THRESHOLD` = 2 GiB − 1 (never trim in
/// practice), `M_TOP_PAD` = [`TOP_PAD`]. The process's resident memory then stays at its peak
/// instead of breathing with every step. Returns `true` when all three settings took (Linux
/// with glibc); elsewhere it does nothing and returns `false`.
///
/// Call it once, first thing in a binary (the `drift` CLI and the model-running examples do;
/// `DRIFT_KEEP_FREED_MEMORY=0` turns it off in the CLI).
/// It changes process-wide state, so a library never calls it on its own.
pub fn keep_freed_memory() -> bool {
    imp::keep_freed_memory()
}

/// Hands the heap memory malloc holds free back to the kernel (`malloc_trim(0)`: the heap top
/// and, since glibc 2.8, every whole free page inside it), so resident memory falls to what is
/// in use. Returns `true` when some memory was released; elsewhere than Linux with glibc it
/// does nothing and returns `false`.
///
/// For a process about to fork many children itself: `fork` copies the page table of every
/// resident page and the child's `exec` tears it down again, so each spawn costs time in
/// proportion to the parent's resident memory (with [`keep_freed_memory`] a dLLM trainer stays
/// at its update's peak, 3.2 GB for dllm-code-v5's coupled-GRPO update: its 40 completions
/// took 29 s to score at that size, 1.8 s before the first update; BENCHMARKS.md, session
/// 15). The next allocations fault the released pages back in, which on a virtual machine
/// whose host reclaims freed guest memory costs about as much as the forks saved (session
/// 26); the code reward's sandbox avoids both by starting runs from a fork server
/// (`drift_rewards::sandbox`), and no longer calls this.
pub fn release_freed_memory() -> bool {
    imp::release_freed_memory()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod imp {
    pub fn release_freed_memory() -> bool {
        // SAFETY: malloc_trim takes malloc's own locks; any thread may call it at any time.
        unsafe { libc::malloc_trim(0) == 1 }
    }

    pub fn keep_freed_memory() -> bool {
        let settings = [
            (libc::M_MMAP_THRESHOLD, super::MMAP_THRESHOLD as libc::c_int),
            (libc::M_TRIM_THRESHOLD, libc::c_int::MAX),
            (libc::M_TOP_PAD, super::TOP_PAD as libc::c_int),
        ];
        // SAFETY: `mallopt` only adjusts malloc's tuning parameters under its own locks; any
        // thread may call it at any time, and it returns 0 (changing nothing) on a bad value.
        settings.iter().all(|&(param, value)| unsafe { libc::mallopt(param, value) } == 1)
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod imp {
    pub fn keep_freed_memory() -> bool {
        false
    }

    pub fn release_freed_memory() -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_accepts_every_setting() {
        // mallopt refuses an mmap threshold above its maximum by returning 0: all three must
        // be accepted for the settings to mean what the docs say.
        assert!(super::keep_freed_memory());
    }

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn freed_heap_pages_go_back_to_the_kernel() {
        // Under keep_freed_memory, 1 MiB blocks come from the heap and stay there when freed;
        // releasing must then find whole free pages to hand back.
        assert!(super::keep_freed_memory());
        let blocks: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8 + 1; 1 << 20]).collect();
        assert_eq!(blocks.iter().map(|b| b[1000] as usize).sum::<usize>(), (1..=64).sum::<usize>());
        drop(blocks);
        assert!(super::release_freed_memory());
    }
}
