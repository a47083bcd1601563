//! The runtime's own waits on a stream: what HIP does inside an API call with `queue->finish()`
//! (a copy of pageable memory waits for its stream before and after staging), as opposed to
//! `hipStreamSynchronize`. Such a wait is not a potentially unsafe call: it makes no capture
//! check and invalidates no capture (docs/hip-semantics.md, "Pageable host memory").

use super::Runtime;
use crate::backend::{Backend, Timeout};
use crate::config::Config;
use crate::error::Result;
use crate::stream::StreamHandle;
use crate::thread::ThreadKeys;

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    /// Waits until the work enqueued on `s` so far has completed — for `0` also the work of
    /// the device's blocking streams, which the null stream's next operation would wait for.
    /// Stale and detached streams are refused as work on them is; a faulted queue answers its
    /// error.
    pub fn stream_wait_idle(&self, s: StreamHandle) -> Result<()> {
        let i = self.resolve_for_work(s)?;
        self.for_sync_set(s, i, |p| self.wait_slot(p, Timeout::NEVER))
    }
}
