//! Changing an executable in place: the parameters of one node, without instantiating again
//! (`hipGraphExecKernelNodeSetParams` and the other `hipGraphExec*SetParams` calls, and the
//! changed nodes of `hipGraphExecUpdate`; docs/hip-semantics.md, "Graphs").
//!
//! Instantiation records, per graph node, where its packets sit in the executable's prebuilt
//! sequence (and, for a dispatch, its block in the executable's argument arena). A patch
//! rewrites those in place:
//!
//! - **packets** are copied into the ring at every launch, so a new packet reaches the next
//!   launch and never one already enqueued: packet fields (kernel object, geometry, segment
//!   sizes) are rewritten at once;
//! - **kernel arguments** are read by the device while a launch runs, from the one block every
//!   launch shares: before different bytes are written there, the executable's last launch must
//!   be done (launches of one executable are ordered, so every earlier one is done too). The
//!   patch waits for that launch's progress point without the runtime lock held, then writes
//!   under the lock, which every launch takes: no launch ever sees half-written arguments, and
//!   a launch enqueued before the patch sees the old ones;
//! - **host functions and events** are read from the executable at every launch, under the
//!   runtime lock, and handed to that launch: they change at once.
//!
//! Arguments longer than the node's block cannot be patched (`NotSupported`): the caller
//! instantiates again. Nodes inside the bodies of conditional nodes have no site of their own
//! here; their executables are instantiated again too.

use super::submit::{dispatch_packet, raw};
use super::{KernelLaunch, Runtime};
use crate::aql::{Condition, KernelDispatchPacket, Packet};
use crate::backend::{Backend, HostFn, Timeout};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::graph::NodeId;
use crate::slot::Table;
use crate::slots::graph::{ExecSlot, GraphExecHandle, NodeSite, Patch, SiteKind};
use crate::thread::ThreadKeys;

impl ExecSlot {
    /// Where node `node`'s packets sit; `InvalidValue` for a node the executable does not have.
    fn site(&self, node: NodeId) -> Result<NodeSite> {
        let records = self.kernarg.as_slice().get(self.sites_at..).unwrap_or(&[]);
        records.get(usize::from(node.0)).map(NodeSite::from_record).ok_or(Error::InvalidValue)
    }
}

/// What a patch waits for before it may change something a launch reads while it runs.
enum Step {
    Done,
    Wait(Option<(usize, u64)>),
}

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    /// Sets dispatch node `node` of executable `x` to `k` (kernel object, geometry, segment
    /// sizes, arguments), as `hipGraphExecKernelNodeSetParams` does; copies and fills are
    /// built-in dispatches and change the same way. Launches enqueued before keep what they
    /// had; the next launch runs `k`. Changing the arguments waits for the executable's last
    /// launch to complete (see the module docs).
    ///
    /// Errors: a bad geometry as [`Self::launch_kernel`] answers it; a stale executable, or a node
    /// that is not a dispatch of it, `InvalidValue`; arguments longer than the node's block
    /// `NotSupported` (nothing changed: instantiate again); a queue fault met while waiting.
    pub fn graph_exec_set_dispatch(&self, x: GraphExecHandle, node: NodeId, k: &KernelLaunch<'_>) -> Result<()> {
        super::graphs::check_launch(k)?;
        loop {
            let step = {
                let mut st = self.lock();
                let xi = Self::exec_slot(&st, x)?;
                let busy = st.execs.slots().get(xi).and_then(|e| e.busy);
                let done = self.launch_done(busy);
                let e = st.execs.slots_mut().get_mut(xi).ok_or(Error::InvalidValue)?;
                let site = e.site(node)?;
                if site.kind != SiteKind::Dispatch {
                    return Err(Error::InvalidValue);
                }
                if k.kernarg.len() > site.arg_room as usize {
                    return Err(Error::NotSupported);
                }
                let start = site.arg_offset as usize;
                let block = e
                    .kernarg
                    .as_mut_slice()
                    .as_flattened_mut()
                    .get_mut(start..start + site.arg_room as usize)
                    .ok_or(Error::InvalidValue)?;
                let (head, tail) = block.split_at_mut(k.kernarg.len());
                let same = head == k.kernarg && tail.iter().all(|b| *b == 0);
                if same || done {
                    if !same {
                        head.copy_from_slice(k.kernarg);
                        tail.fill(0);
                    }
                    let slot = e.packets.as_mut_slice().get_mut(site.packet as usize).ok_or(Error::InvalidValue)?;
                    let old = KernelDispatchPacket::from_words(&slot.0);
                    let mut p = dispatch_packet(
                        k.kernel_object,
                        k.grid,
                        k.workgroup,
                        k.group_segment_size,
                        k.private_segment_size,
                    );
                    p.header = old.header;
                    p.kernarg_address = old.kernarg_address;
                    p.completion_signal = old.completion_signal;
                    *slot = raw(&p);
                    Step::Done
                } else {
                    Step::Wait(busy)
                }
            };
            match step {
                Step::Done => return Ok(()),
                Step::Wait(busy) => self.wait_launch(busy)?,
            }
        }
    }

    /// Sets host-function node `node` of executable `x` to run `f` (`hipGraphExecHostNodeSetParams`),
    /// from the next launch on. A node that is not a host node of `x` is `InvalidValue`.
    pub fn graph_exec_set_host(&self, x: GraphExecHandle, node: NodeId, f: HostFn) -> Result<()> {
        self.patch(x, node, SiteKind::Host, |p, at| match p {
            Patch::Host { start, f: old, .. } if *start == at => {
                *old = f;
                true
            }
            _ => false,
        })
    }

    /// Sets event-record or event-wait node `node` of executable `x` to record or wait for
    /// `event` (a raw event handle, as [`crate::NodeKind::EventRecord`] holds), from the next
    /// launch on. A node that is neither is `InvalidValue`.
    pub fn graph_exec_set_event(&self, x: GraphExecHandle, node: NodeId, event: u64) -> Result<()> {
        self.patch(x, node, SiteKind::Event, |p, at| match p {
            Patch::Event { index, event: old } | Patch::EventWait { index, event: old } if *index == at => {
                *old = event;
                true
            }
            _ => false,
        })
    }

    /// Waits until the last launch of executable `x` is done (every earlier one is then done
    /// too): what must precede a change of memory its launches read while they run.
    pub fn graph_exec_wait(&self, x: GraphExecHandle) -> Result<()> {
        loop {
            let busy = {
                let st = self.lock();
                let xi = Self::exec_slot(&st, x)?;
                let busy = st.execs.slots().get(xi).and_then(|e| e.busy);
                if self.launch_done(busy) {
                    return Ok(());
                }
                busy
            };
            self.wait_launch(busy)?;
        }
    }

    /// Applies `f` to the per-launch patch of node `node` (of kind `kind`) of executable `x`.
    fn patch(
        &self,
        x: GraphExecHandle,
        node: NodeId,
        kind: SiteKind,
        f: impl Fn(&mut Patch, u32) -> bool,
    ) -> Result<()> {
        let mut st = self.lock();
        let xi = Self::exec_slot(&st, x)?;
        let e = st.execs.slots_mut().get_mut(xi).ok_or(Error::InvalidValue)?;
        let site = e.site(node)?;
        if site.kind != kind {
            return Err(Error::InvalidValue);
        }
        for p in e.patches.iter_mut() {
            if f(p, site.packet) {
                return Ok(());
            }
        }
        Err(Error::InvalidValue)
    }

    /// Waits, without the runtime lock, for the launch recorded as `busy` (its stream slot and
    /// the progress count it completes at).
    fn wait_launch(&self, busy: Option<(usize, u64)>) -> Result<()> {
        let Some((slot, count)) = busy else { return Ok(()) };
        let Some(progress) = self.stream(slot)?.progress.get() else { return Ok(()) };
        let target = 1i64.saturating_sub(i64::try_from(count).unwrap_or(i64::MAX));
        self.backend.signal_wait(progress.handle(), Condition::Lt, target, Timeout::NEVER).map(|_| ())
    }
}
