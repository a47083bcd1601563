//! Graphs built node by node (docs/hip-semantics.md, "Graphs"): kernel, copy, fill, host,
//! child-graph, empty, event and conditional nodes; edges; queries; clones; per-node parameters
//! in graphs and in executables; whole-graph update.
//!
//! # Model
//!
//! Graphs are to have one model, core's, with this layer translating types and errors over it;
//! the layer gets there in stages (docs/hip-semantics.md, "Graphs": its "Stages" list). Today
//! a graph lives in one of two places:
//!
//! - **core**: a capture's graph while the capture records; then, while core holds every node
//!   of it as it is ([`CoreHeld`]), a captured graph whose nodes are kernel dispatches, plain
//!   host functions, event records and waits or empty nodes, and a graph of [`hipGraphCreate`]
//!   while the nodes added are of those kinds (`table.rs` `held_as_is`: reading the node back
//!   from core gives the HIP parameters it was added with). Adding such nodes
//!   (`hipGraphAdd{Kernel,Host,Empty,EventRecord,EventWait}Node`), adding dependencies, the
//!   lists (`hipGraphGetNodes`, `…GetRootNodes`, `…GetEdges`, a node's dependencies and
//!   dependents), node types, host and event nodes' parameters read back
//!   (`hipGraphHostNodeGetParams`, `hipGraphEvent{Record,Wait}NodeGetEvent`) and instantiation
//!   work on core's graph, the layer translating
//!   handles, parameters and errors; an executable instantiated from it is core's own, and
//!   takes its snapshot of the graph when first changed. At most 64 graphs wait in core at
//!   once (`table.rs` `CORE_BUILT`), so captures and instantiations keep core's graph slots;
//! - **this layer's model** ([`Graph`], `model.rs`), built from core's graph under the same
//!   handle (node handles stay valid) when a call needs what core's graph does not hold yet —
//!   copy, fill, child-graph, conditional and memory nodes, a kernel node's parameters read
//!   back, any node's set in the graph, node and edge removal, clones (`hipGraphNodeFindInClone`), stamps for
//!   [`hipGraphExecUpdate`] — and then for every graph waiting in core, not only the one
//!   called on (`table.rs` `graphs`); or from the start when 64 wait already: nodes with their HIP
//!   parameters (kernel arguments deep-copied, as HIP copies them) and edges. Instantiation
//!   flattens it — child graphs inlined, multi-row copies and fills split into rows — into a
//!   core graph, which core turns into AQL packets; the core graph is dropped at once and the
//!   executable keeps a snapshot of the graph and what each node became, so
//!   `hipGraphExec*SetParams` and [`hipGraphExecUpdate`] patch the nodes that changed in place,
//!   or rebuild the executable behind the same handle when a node's shape changed (`patch.rs`;
//!   launches already enqueued keep what they had).
//!
//! A graph core holds stops changing in core once an executable was instantiated from it or
//! its model was built (both read core's graph as it was): the next change takes it over.
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
