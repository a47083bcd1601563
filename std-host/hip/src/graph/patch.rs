//! Executables changed in place: what each node of this layer became in core's executable (its
//! *site*, recorded by [`super::build`] as it flattens the graph), and the change of one node's
//! parameters there without instantiating again (docs/hip-semantics.md, "Graphs").
//!
//! A node is patched in place when its new parameters give the shape it was built with:
//!
//! - a kernel: always one dispatch; its arguments must fit the block the executable reserved
//!   for them (core refuses longer ones, and the executable is built again);
//! - a copy: the same number of rows, each moved the same way — by one device copy, staged
//!   through a pinned buffer towards or from pageable memory (the new row no longer than the
//!   buffer), or by the host alone; a staged row's host-copy record is rewritten once the
//!   executable's last launch is done, since the host reads it while a launch runs;
//! - a fill: the same number of rows, each one fill dispatch;
//! - a host function, an event record or wait: one node each, always.
//!
//! Anything else (another row count, a row that moves another way, a captured operation that has
//! no HIP node type) is built again; the result is the same, only slower. Core's rules for a
//! patch (launches already enqueued keep what they had) are in `core/src/runtime/graph_update.rs`.
//!
//! # Stamps
//!
//! `hipGraphExecUpdate` must find the few nodes that changed among thousands without comparing
//! every node's parameters. Each node of a graph carries a stamp, drawn from one process-wide
//! counter when the node is added and again whenever it may change (any mutable access); a
//! clone keeps its nodes' stamps, and so does an executable's snapshot of its graph, which
//! takes the new stamp of each node an update brings in. Two nodes with the same stamp are
//! therefore copies of one node, unchanged since: an update scans the two stamp lists and
//! compares parameters only where the stamps differ. Stamp 0 marks a destroyed node.

use aqueduct::{BuiltinKernel, Error, GraphExecHandle, HostFn, NodeId};

use crate::error::HipResult;
use crate::global::Global;

use super::build::{builtin_launch, copy_args, fill_args, way, Row, Site, Staging, Way};
use super::model::{CopyNode, Kind};

/// Calls `f` with every index where the stamp lists `a` and `b` (of equal length) differ,
/// comparing eight stamps at a time: an update scans thousands of nodes to find a few.
pub(super) fn differing<E>(a: &[u64], b: &[u64], mut f: impl FnMut(u16) -> Result<(), E>) -> Result<(), E> {
    const CHUNK: usize = 8;
    for (k, (x, y)) in a.chunks(CHUNK).zip(b.chunks(CHUNK)).enumerate() {
        // Branch-free, so the compiler compares a chunk in a few vector instructions.
        if x.iter().zip(y).fold(0, |d, (s, t)| d | (s ^ t)) != 0 {
            for (i, (s, t)) in x.iter().zip(y).enumerate() {
                if s != t {
                    f((k * CHUNK + i) as u16)?;
                }
            }
        }
    }
    Ok(())
}

/// Whether a node's patch is made, or the executable must be built again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Patched {
    Done,
    Rebuild,
}

/// The executable being patched.
pub(super) struct Target<'a> {
    pub(super) g: &'a Global,
    pub(super) core: GraphExecHandle,
    pub(super) device: u32,
    pub(super) staging: &'a mut Staging,
}

/// Core's answer to a patch: `NotSupported` means "build again".
fn core_patch(r: aqueduct::Result<()>) -> HipResult<Patched> {
    match r {
        Ok(()) => Ok(Patched::Done),
        Err(Error::NotSupported) => Ok(Patched::Rebuild),
        Err(e) => Err(e.into()),
    }
}

impl Target<'_> {
    fn builtin(&self, kernel: BuiltinKernel, node: NodeId, args: &[u8]) -> HipResult<Patched> {
        let launch = builtin_launch(self.g, self.device, kernel, args)?;
        core_patch(self.g.rt.graph_exec_set_dispatch(self.core, node, &launch))
    }

    /// Sets the node built as `site` to `new` (a node of the kind it was built from).
    pub(super) fn patch(&mut self, site: &Site, new: &Kind) -> HipResult<Patched> {
        let rt = &self.g.rt;
        match (site, new) {
            (Site::Dispatch(n), Kind::Kernel(k)) => core_patch(rt.graph_exec_set_dispatch(self.core, *n, &k.launch()?)),
            (Site::Rows(rows), Kind::Memset(m)) if rows.len() == m.height => {
                for (row, r) in rows.iter().enumerate() {
                    let Row::Dispatch(n) = *r else { return Ok(Patched::Rebuild) };
                    if self.builtin(BuiltinKernel::Fill, n, &fill_args(m, row))? == Patched::Rebuild {
                        return Ok(Patched::Rebuild);
                    }
                }
                Ok(Patched::Done)
            }
            (Site::Rows(rows), Kind::Copy(c)) => self.copy(rows, c),
            (Site::Host(n), Kind::Host { func, data }) => {
                let f = HostFn::Plain { func: *func, data: *data as *mut std::ffi::c_void };
                core_patch(rt.graph_exec_set_host(self.core, *n, f))
            }
            (Site::Event(n), Kind::EventRecord(e) | Kind::EventWait(e)) => {
                core_patch(rt.graph_exec_set_event(self.core, *n, *e))
            }
            _ => Ok(Patched::Rebuild),
        }
    }

    /// A copy whose rows move the way they were built to: device copies patched in core,
    /// host-copy records rewritten once no launch runs.
    fn copy(&mut self, rows: &[Row], c: &CopyNode) -> HipResult<Patched> {
        let new = c.rows();
        if new.len() != rows.len() {
            return Ok(Patched::Rebuild);
        }
        let fits = |room: u64, bytes: u64| bytes <= room;
        let same =
            new.iter().zip(rows).all(|(&(dst, src, bytes), row)| match (way(self.g, dst, src, bytes, true), row) {
                (Way::Empty, Row::Empty) | (Way::Device, Row::Dispatch(_)) | (Way::Host, Row::Host { .. }) => true,
                (Way::ToDevice, Row::ToDevice { room, .. }) | (Way::ToHost, Row::ToHost { room, .. }) => {
                    fits(*room, bytes)
                }
                _ => false,
            });
        if !same {
            return Ok(Patched::Rebuild);
        }
        if rows.iter().any(|r| !matches!(r, Row::Empty | Row::Dispatch(_))) {
            self.g.rt.graph_exec_wait(self.core)?;
        }
        for (&(dst, src, bytes), row) in new.iter().zip(rows) {
            let (copy, record) = match *row {
                Row::Empty => continue,
                Row::Dispatch(n) => ((n, dst, src), None),
                Row::ToDevice { copy, record, buffer, .. } => ((copy, dst, buffer), Some((record, buffer, src))),
                Row::ToHost { copy, record, buffer, .. } => ((copy, buffer, src), Some((record, dst, buffer))),
                Row::Host { record } => {
                    self.set_record(record, dst, src, bytes);
                    continue;
                }
            };
            if let Some((record, to, from)) = record {
                self.set_record(record, to, from, bytes);
            }
            let (node, to, from) = copy;
            if self.builtin(BuiltinKernel::Copy, node, &copy_args(to, from, bytes))? == Patched::Rebuild {
                return Ok(Patched::Rebuild);
            }
        }
        Ok(Patched::Done)
    }

    fn set_record(&mut self, record: usize, dst: u64, src: u64, bytes: u64) {
        if let Some(r) = self.staging.copy_mut(record) {
            r.dst = dst;
            r.src = src;
            r.bytes = bytes;
        }
    }
}

/// Whether node kinds `a` and `b` (of the same type) have the same parameters. Unsure answers
/// are `false`: a node taken as changed is only patched again.
pub(super) fn same_params(a: &Kind, b: &Kind) -> bool {
    match (a, b) {
        (Kind::Kernel(x), Kind::Kernel(y)) => {
            x.func == y.func
                && x.grid == y.grid
                && x.block == y.block
                && x.shared_mem == y.shared_mem
                && x.bytes() == y.bytes()
        }
        (Kind::Copy(x), Kind::Copy(y)) => x == y,
        (Kind::Memset(x), Kind::Memset(y)) => x == y,
        (Kind::Host { func: f, data: d }, Kind::Host { func: h, data: e }) => std::ptr::fn_addr_eq(*f, *h) && d == e,
        (Kind::Empty, Kind::Empty) => true,
        (Kind::EventWait(x), Kind::EventWait(y)) | (Kind::EventRecord(x), Kind::EventRecord(y)) => x == y,
        (Kind::MemAlloc { address: a, bytes: n }, Kind::MemAlloc { address: b, bytes: m }) => a == b && n == m,
        (Kind::MemFree(x), Kind::MemFree(y)) => x == y,
        (Kind::Raw(x), Kind::Raw(y)) => x.args == y.args && same_raw(&x.kind, &y.kind),
        _ => false,
    }
}

/// Whether two captured operations (their arguments aside) are the same.
fn same_raw(a: &aqueduct::NodeKind, b: &aqueduct::NodeKind) -> bool {
    use aqueduct::NodeKind as N;
    match (a, b) {
        (N::Dispatch(x), N::Dispatch(y)) => {
            x.kernel_object == y.kernel_object
                && x.grid == y.grid
                && x.workgroup == y.workgroup
                && x.group_segment_size == y.group_segment_size
                && x.private_segment_size == y.private_segment_size
        }
        (N::WaitValue(x), N::WaitValue(y)) => x == y,
        (N::Host(HostFn::Plain { func: f, data: d }), N::Host(HostFn::Plain { func: h, data: e })) => {
            std::ptr::fn_addr_eq(*f, *h) && d == e
        }
        (
            N::Host(HostFn::StreamCallback { func: f, stream: s, data: d }),
            N::Host(HostFn::StreamCallback { func: h, stream: t, data: e }),
        ) => std::ptr::fn_addr_eq(*f, *h) && s == t && d == e,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::Graph;
    use super::*;

    #[test]
    fn differing_finds_every_changed_stamp_across_chunks() {
        let a: Vec<u64> = (1..=21).collect();
        let mut b = a.clone();
        for i in [0, 7, 8, 20] {
            b[i] += 100;
        }
        let mut found = Vec::new();
        differing::<()>(&a, &b, |i| {
            found.push(i);
            Ok(())
        })
        .unwrap();
        assert_eq!(found, [0, 7, 8, 20]);
        assert_eq!(differing(&a, &a, |_| Err(())), Ok(()));
    }

    #[test]
    fn stamps_follow_changes_and_clones_keep_them() {
        let mut g = Graph::default();
        let a = g.push(Kind::Empty, &[]).unwrap();
        let b = g.push(Kind::Empty, &[a]).unwrap();
        assert!(g.stamp(a) != 0 && g.stamp(a) != g.stamp(b));
        let c = g.clone();
        assert_eq!(c.stamps(), g.stamps());
        let before = g.stamp(b);
        g.kind_mut(b).unwrap();
        assert!(g.stamp(b) != before && g.stamp(a) == c.stamp(a));
        g.set_stamp(a, 0);
        g.restamp(9);
        assert_eq!((g.stamp(a), g.stamp(9)), (0, 0));
    }
}
