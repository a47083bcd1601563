//! The null stream's implicit synchronisation and point-in-time markers
//! (hip-semantics.md §3).

use super::{lookup_stream, push_dep, Deps, Runtime, SlotState, Spec, State, StreamKind, MARKER_WAIT, PENDING};
use crate::aql::Condition;
use crate::backend::{Backend, Timeout};
use crate::error::{Error, Result};
use crate::signal::SignalHandle;
use crate::table::Lookup;
use crate::thread::ThreadKeys;

impl<
        B: Backend,
        K: ThreadKeys,
        const S: usize,
        const E: usize,
        const T: usize,
        const M: usize,
        const G: usize,
        const N: usize,
        const X: usize,
    > Runtime<B, K, S, E, T, M, G, N, X>
{
    pub(super) fn take_marker(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        consumer: usize,
    ) -> Result<SignalHandle> {
        let consumer_generation = st.streams.get(consumer).map_or(0, |s| s.generation.current);
        let idx = match self.free_marker(st) {
            Some(m) => m,
            None => {
                // Wait (bounded) for the oldest marker's consumer to move on.
                let oldest = st.markers.iter().filter(|m| m.busy).min_by_key(|m| m.release_at).copied();
                if let Some(m) = oldest {
                    if let Some(s) = st.streams.get(m.consumer) {
                        if let Some(hw) = &s.hw {
                            let _ = self.backend.signal_wait(
                                hw.signal,
                                Condition::Lt,
                                1 - m.release_at as i64,
                                MARKER_WAIT,
                            );
                        }
                    }
                }
                self.free_marker(st).ok_or(Error::OutOfMemory)?
            }
        };
        let m = st.markers.get_mut(idx).ok_or(Error::OutOfMemory)?;
        if m.signal.is_null() {
            m.signal = self.backend.signal_create(1)?;
        } else {
            // SAFETY: pool markers stay allocated for the runtime's life.
            unsafe { m.signal.get() }.reset(1);
        }
        m.busy = true;
        m.consumer = consumer;
        m.consumer_generation = consumer_generation;
        m.release_at = PENDING;
        st.markers_taken += 1;
        Ok(m.signal)
    }

    /// A free marker slot, reclaiming those whose consumer has passed them.
    pub(super) fn free_marker(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>) -> Option<usize> {
        for idx in 0..M {
            let m = *st.markers.get(idx)?;
            if !m.busy {
                return Some(idx);
            }
            // The producer's packet must have completed the marker, and (below) the consumer's
            // barrier must have read it.
            // SAFETY: pool markers stay allocated for the runtime's life.
            if m.release_at == PENDING || unsafe { m.signal.get() }.load() > 0 {
                continue;
            }
            let passed = match st.streams.get(m.consumer) {
                // The consumer slot moved on to another life or was freed: its queue drained.
                Some(s) if s.state == SlotState::Free => true,
                Some(s) if s.generation.current != m.consumer_generation && s.state == SlotState::Live => true,
                Some(s) => match &s.hw {
                    Some(hw) => self
                        .backend
                        .signal_wait(hw.signal, Condition::Lt, 1 - m.release_at as i64, Timeout::ZERO)
                        .is_ok(),
                    None => true,
                },
                None => true,
            };
            if passed {
                if let Some(m) = st.markers.get_mut(idx) {
                    m.busy = false;
                }
                return Some(idx);
            }
        }
        None
    }

    /// Makes `consumer` wait for everything stream `producer` has published so far: a marker
    /// on the producer, returned as the dependency to put in the consumer's next barrier.
    pub(super) fn point_in_time(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        producer: usize,
        consumer: usize,
    ) -> Result<SignalHandle> {
        let marker = self.take_marker(st, consumer)?;
        if let Err(e) = self.publish(st, producer, &[Spec::Mark(marker), Spec::Deps([0; 5])]) {
            // Never published, so nothing would ever complete it and the pool would lose it:
            // complete it here; it comes free once the consumer's release point passes.
            // SAFETY: pool markers stay allocated for the runtime's life.
            unsafe { marker.get() }.reset(0);
            return Err(e);
        }
        Ok(marker)
    }

    /// The implicit dependencies of work on slot `i` (hip-semantics.md §3 rules 1, 2, 4, 5).
    pub(super) fn implicit_deps(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        i: usize,
        deps: &mut Deps,
    ) -> Result<()> {
        let Some(s) = st.streams.get(i) else { return Err(Error::InvalidHandle) };
        let device = s.device;
        match s.kind {
            StreamKind::Null => {
                for p in 0..S {
                    let busy = st
                        .streams
                        .get(p)
                        .is_some_and(|ps| ps.is_blocking_user() && ps.device == device && !self.is_idle(ps));
                    if busy {
                        let m = self.point_in_time(st, p, i)?;
                        push_dep(deps, m.0)?;
                    }
                }
            }
            _ if s.flags.is_blocking() => {
                let raw = st.devices.get(device as usize).map_or(0, |d| d.null_stream);
                if let Lookup::Live(n) = lookup_stream(&st.streams, raw) {
                    let busy = st.streams.get(n).is_some_and(|ns| !self.is_idle(ns));
                    if busy {
                        let m = self.point_in_time(st, n, i)?;
                        push_dep(deps, m.0)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}
