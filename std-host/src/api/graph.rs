//! [`Graph`] and [`GraphExec`]: RAII over core's graph and executable handles.

use aqueduct::{GraphExecHandle, GraphHandle};

use super::stream::Stream;
use super::{Device, Result};

/// A graph (captured or built). Destroyed on drop.
pub struct Graph<'d> {
    dev: &'d Device,
    handle: GraphHandle,
}

impl std::fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph").field("handle", &format_args!("{:#x}", self.handle.0)).finish()
    }
}

impl<'d> Graph<'d> {
    pub(crate) fn from_handle(dev: &'d Device, handle: GraphHandle) -> Self {
        Graph { dev, handle }
    }

    /// Creates an empty graph.
    pub fn new(dev: &'d Device) -> Result<Self> {
        Ok(Graph { dev, handle: dev.shared.rt.graph_create()? })
    }

    /// Core's handle.
    pub fn handle(&self) -> GraphHandle {
        self.handle
    }

    /// Number of nodes.
    pub fn node_count(&self) -> Result<usize> {
        self.dev.shared.rt.graph_node_count(self.handle)
    }

    /// Number of edges.
    pub fn edge_count(&self) -> Result<usize> {
        // The count comes back whatever room `out` has.
        self.dev.shared.rt.graph_edges(self.handle, &mut [])
    }

    /// Flattens the graph into a ready packet sequence.
    pub fn instantiate(&self) -> Result<GraphExec<'d>> {
        Ok(GraphExec { dev: self.dev, handle: self.dev.shared.rt.graph_instantiate(self.handle)? })
    }
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.dev.shared.rt.graph_destroy(self.handle) {
            self.dev.record_drop_error(e);
        }
    }
}

/// An instantiated graph. Destroyed on drop (a launch still running completes first).
pub struct GraphExec<'d> {
    dev: &'d Device,
    handle: GraphExecHandle,
}

impl std::fmt::Debug for GraphExec<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphExec").field("handle", &format_args!("{:#x}", self.handle.0)).finish()
    }
}

impl GraphExec<'_> {
    /// Core's handle.
    pub fn handle(&self) -> GraphExecHandle {
        self.handle
    }

    /// Launches the graph on `stream` after the work already there.
    pub fn launch(&self, stream: &Stream<'_>) -> Result<()> {
        self.dev.shared.rt.graph_launch(self.handle, stream.handle())
    }
}

impl Drop for GraphExec<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.dev.shared.rt.graph_exec_destroy(self.handle) {
            self.dev.record_drop_error(e);
        }
    }
}
