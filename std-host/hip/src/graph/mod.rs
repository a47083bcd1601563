//! Graphs built node by node (docs/hip-semantics.md, "Graphs"): kernel, copy, fill, host,
//! child-graph, empty, event and conditional nodes; edges; queries; clones; per-node parameters
//! in graphs and in executables; whole-graph update.
//!
//! # Model
//!
//! A graph made here ([`hipGraphCreate`], [`hipGraphClone`], or a capture once it ends) is a
//! [`Graph`] kept in this layer: nodes with their HIP parameters (kernel arguments deep-copied,
//! as HIP copies them) and edges. Instantiation flattens it — child graphs inlined, multi-row
//! copies and fills split into rows — into a core graph, which core turns into AQL packets; the
//! core graph is dropped at once and the executable keeps a snapshot of the graph and what each
//! node became, so `hipGraphExec*SetParams` and [`hipGraphExecUpdate`] patch the nodes that
//! changed in place, or rebuild the executable behind the same handle when a node's shape changed
//! (`patch.rs`; launches already enqueued keep what they had).
//!
//! While a capture records, its graph is core's; the calls that make sense then (adding nodes,
//! listing nodes and edges, node types) go to core. When the capture ends the graph is taken
//! over here under the same handle, and node handles given out during the capture stay valid.
//! A captured graph of kernels, host functions and events stays core's until a call needs this
//! layer's model of it ([`CoreHeld`]): instantiated as it is, it is core's graph that core
//! instantiates, and the executable takes its snapshot of the graph when first changed.
//!
//! Copies from or to pageable host memory (memory not from `hipMalloc`/`hipHostMalloc`) are
//! staged through pinned buffers the executable owns, in graph order: a host node fills the
//! buffer from the pageable source when the node's dependencies are done, and a device copy
//! moves it on (the other way round for device-to-host), so every launch reads the host memory
//! as it is when the copy's turn comes.
//!
//! Node types use HIP 5.2's numbering (`hipGraphNodeTypeKernel` = 1 …, the header programs are
//! built against); every copy node reports `hipGraphNodeTypeMemcpy`, as the newest HIP does.
//!
//! # Ownership
//!
//! What a graph owns beside its nodes is held by the object it belongs to, never listed
//! process-wide (`ownership.rs`): the memory of a captured graph's allocations is held by the
//! capture while it records (`crate::capture`), then by the graph's table entry, shared with the
//! executable instantiated from it, and goes back with the last of them; a capture into an
//! existing graph holds that graph ([`TargetLease`]) until it ends.
//!
//! # Files
//!
//! Each file has one behaviour; imports point one way, lowest first (`scripts/check-layers
//! std-host/hip/src`): `model` (parameter structs, node kinds, a graph's nodes and edges,
//! stamps) < `build` (instantiation: flattening into core graphs; a core graph's nodes read
//! back) < `ownership` < `table` (graph and node handles, captured graphs taken over) <
//! `nodes` (`hipGraphAdd*Node`) < `conditional` < `patch` (changing a built node in place) <
//! `params` (node parameters in graphs) < `topology` (create, destroy, clone, edges, queries) <
//! `exec` (executables, whole-graph update) < `exec_params` (node parameters in executables).

mod build;
mod conditional;
mod exec;
mod exec_params;
mod model;
mod nodes;
mod ownership;
mod params;
mod patch;
mod table;
mod topology;

pub(crate) use ownership::{GraphMemory, Recorder};
pub(crate) use table::{
    adopt_captured, is_live_node, lease_target, merge_captured, slot_count, CaptureInto, TargetLease,
};
