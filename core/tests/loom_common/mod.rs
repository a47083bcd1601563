//! Helpers shared by the loom models: execution counting and planted-bug runs.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

/// Executions explored, and those in which no thread spent its spin budget (the full checks ran).
#[derive(Debug, Clone, Copy)]
pub struct Explored {
    pub executions: usize,
    pub complete: usize,
}

impl Explored {
    pub fn assert_explored(self, name: &str) {
        eprintln!("{name}: {} executions, {} complete", self.executions, self.complete);
        assert!(self.executions > 1, "{name}: loom explored a single execution");
        assert!(self.complete > 1, "{name}: the full checks ran in at most one execution");
    }
}

/// Runs `f` under `loom::model` with the preemption bound loom reads from the environment
/// (LOOM_MAX_PREEMPTIONS, default 3 here; LOOM_MAX_BRANCHES, default 10,000 here) and counts
/// the executions; `f` returns whether the execution ran to completion (no thread gave up).
pub fn explore(f: impl Fn() -> bool + Sync + Send + 'static) -> Explored {
    let counts = std::sync::Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let counter = counts.clone();
    let mut builder = loom::model::Builder::new();
    if std::env::var("LOOM_MAX_PREEMPTIONS").is_err() {
        builder.preemption_bound = Some(3);
    }
    if std::env::var("LOOM_MAX_BRANCHES").is_err() {
        // Spinning producers and consumer (yield_now loops) need more than loom's default 1000.
        builder.max_branches = 10_000;
    }
    builder.check(move || {
        counter[0].fetch_add(1, SeqCst);
        if f() {
            counter[1].fetch_add(1, SeqCst);
        }
    });
    Explored { executions: counts[0].load(SeqCst), complete: counts[1].load(SeqCst) }
}

/// Runs a planted-bug model and returns whether it failed (loom or an assertion found the bug).
pub fn fails(model: impl FnOnce() -> Explored + std::panic::UnwindSafe) -> bool {
    match std::panic::catch_unwind(model) {
        Ok(n) => {
            eprintln!("planted bug NOT caught in {n:?}");
            false
        }
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("(non-string panic)");
            eprintln!("planted bug caught: {msg}");
            true
        }
    }
}
