//! A guard that runs a closure when dropped unless it is defused (embassy-hal-internal's
//! `OnDrop`): a multi-step bring-up arms one with the undo of what it has acquired, returns early
//! with `?` on any failure, and defuses it once every step has succeeded.

/// Runs `f` on drop, unless [`OnDrop::defuse`] was called.
pub(crate) struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> OnDrop<F> {
    /// Arms the guard.
    pub(crate) fn new(f: F) -> Self {
        OnDrop(Some(f))
    }

    /// Disarms the guard: `f` never runs.
    pub(crate) fn defuse(mut self) {
        self.0 = None;
    }
}

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}
