//! What the loom models share: running a model under loom's `Builder` and counting its
//! executions, and the doorbell a consumer sleeps on.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// Runs `model` under loom and returns the number of executions loom explored, after printing it
/// and asserting that it is more than one (a model that explores a single execution checks
/// nothing about concurrency; loom#392).
///
/// The bounds come from the environment when set (`LOOM_MAX_PREEMPTIONS`, `LOOM_MAX_BRANCHES`);
/// the defaults here are 3 preemptions and 20,000 branches.
pub fn explore(name: &str, model: impl Fn() + Sync + Send + 'static) -> usize {
    let executions = Arc::new(AtomicUsize::new(0));
    let counter = executions.clone();
    let mut builder = loom::model::Builder::new();
    if std::env::var("LOOM_MAX_PREEMPTIONS").is_err() {
        builder.preemption_bound = Some(3);
    }
    if std::env::var("LOOM_MAX_BRANCHES").is_err() {
        builder.max_branches = 20_000;
    }
    builder.check(move || {
        counter.fetch_add(1, SeqCst);
        model();
    });
    let n = executions.load(SeqCst);
    println!("loom model {name}: {n} executions");
    assert!(n > 1, "loom model {name} explored a single execution");
    n
}

/// The queue's doorbell as the consumer sees it: producers ring it after they publish (the
/// backend's doorbell write) and report when they are done, and the consumer sleeps on it when it
/// finds nothing to run, as a CP waits for a doorbell. A sleeping consumer, rather than a
/// spinning one, keeps loom's schedules fair: loom may keep choosing one of two spinning threads
/// over a third thread that both wait for.
#[derive(Default)]
pub struct Doorbell {
    state: loom::sync::Mutex<Bell>,
    rung: loom::sync::Condvar,
}

/// What the consumer last saw of the doorbell.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Bell {
    pub rings: u64,
    pub producers_done: usize,
}

impl Doorbell {
    pub fn ring(&self) {
        self.state.lock().unwrap().rings += 1;
        self.rung.notify_all();
    }

    pub fn producer_done(&self) {
        self.state.lock().unwrap().producers_done += 1;
        self.rung.notify_all();
    }

    pub fn now(&self) -> Bell {
        *self.state.lock().unwrap()
    }

    /// Sleeps until the doorbell differs from `seen`.
    pub fn wait_change(&self, seen: Bell) {
        let mut state = self.state.lock().unwrap();
        while *state == seen {
            state = self.rung.wait(state).unwrap();
        }
    }
}
