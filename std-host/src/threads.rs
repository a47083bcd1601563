//! Thread keys from a thread-local, and the thread-exit hook that gives a thread's per-thread
//! streams back to every runtime it used.
//!
//! Core keeps per-thread default streams, the current device and the capture mode in a
//! fixed-capacity table keyed by a [`ThreadKey`]. Here a key is a number from a process-wide
//! counter, kept in a `const`-initialised thread-local without a destructor, so it stays readable
//! while other thread-locals are being destroyed. A second thread-local, with a destructor, holds
//! the runtimes the thread touched and calls their `thread_exit` when the thread ends, so a
//! short-lived thread does not keep a slot of the thread table.

use std::cell::{Cell, RefCell};
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use aqueduct::{SpinRawMutex, ThreadKey, ThreadKeys};

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

std::thread_local! {
    static KEY: Cell<u64> = const { Cell::new(0) };
    static EXIT: RefCell<ExitHooks> = const { RefCell::new(ExitHooks(Vec::new())) };
}

/// Something to tell when the calling thread ends.
pub trait ThreadExit: Send + Sync {
    /// Called on the ending thread, from a thread-local destructor.
    fn thread_exit(&self);
}

struct ExitHooks(Vec<Weak<dyn ThreadExit>>);

impl Drop for ExitHooks {
    fn drop(&mut self) {
        for hook in self.0.drain(..) {
            if let Some(h) = hook.upgrade() {
                h.thread_exit();
            }
        }
    }
}

/// Thread keys for std threads.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdThreadKeys;

/// The calling thread's key (assigned on first use).
pub fn current_key() -> ThreadKey {
    let k = KEY
        .try_with(|k| {
            if k.get() == 0 {
                // Ordering: Relaxed; only uniqueness of the counter matters.
                k.set(NEXT_KEY.fetch_add(1, Ordering::Relaxed));
            }
            k.get()
        })
        // A const thread-local without a destructor is always accessible; this is unreachable.
        .unwrap_or(u64::MAX);
    ThreadKey(NonZeroU64::new(k).unwrap_or(NonZeroU64::MAX))
}

impl ThreadKeys for StdThreadKeys {
    type RawMutex = SpinRawMutex;

    fn current(&self) -> ThreadKey {
        current_key()
    }
}

/// Asks for `hook.thread_exit()` when the calling thread ends (once per hook and thread).
pub fn on_thread_exit(hook: &Arc<dyn ThreadExit>) {
    let _ = EXIT.try_with(|hooks| {
        if let Ok(mut hooks) = hooks.try_borrow_mut() {
            let w = Arc::downgrade(hook);
            hooks.0.retain(|h| h.strong_count() > 0);
            if !hooks.0.iter().any(|h| Weak::ptr_eq(h, &w)) {
                hooks.0.push(w);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_differ_between_threads_and_stay_put_within_one() {
        let a = current_key();
        assert_eq!(a, current_key());
        let b = std::thread::spawn(current_key).join().unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn exit_hooks_run_on_the_ending_thread() {
        struct Count(AtomicU64);
        impl ThreadExit for Count {
            fn thread_exit(&self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let c = Arc::new(Count(AtomicU64::new(0)));
        let hook: Arc<dyn ThreadExit> = c.clone();
        std::thread::scope(|s| {
            // An explicit join waits for the thread's end, thread-local destructors included.
            s.spawn(|| {
                on_thread_exit(&hook);
                on_thread_exit(&hook);
            })
            .join()
            .unwrap();
        });
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
    }
}
