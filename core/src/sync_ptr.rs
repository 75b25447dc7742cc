//! A raw pointer a rayon closure may carry, for kernels whose threads write disjoint parts of
//! one output buffer (`nn::amx`'s column parts, `ops::attention`'s heads).

/// `*mut T` marked `Send + Sync`: each user documents why its threads' writes are disjoint.
#[derive(Clone, Copy)]
pub(crate) struct SyncPtr<T>(pub(crate) *mut T);

impl<T> SyncPtr<T> {
    /// The pointer (a method, so closures capture the whole `Sync` wrapper, not its field).
    pub(crate) fn get(self) -> *mut T {
        self.0
    }
}

// SAFETY: the wrapper only moves the address between threads; every dereference is the
// caller's, under its own disjointness argument.
unsafe impl<T> Send for SyncPtr<T> {}
unsafe impl<T> Sync for SyncPtr<T> {}
