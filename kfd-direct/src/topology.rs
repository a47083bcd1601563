//! GPU discovery from the sysfs topology (docs/kfd-aql.md §5) and the queue-buffer sizes the kernel
//! derives from it (§1.5).
//!
//! Nodes are probed in numeric order (`nodes/0`, `nodes/1`, … until one is missing), which is
//! the order THUNK sorts them into; a node is a usable GPU when its `gpu_id` is non-zero and its
//! `simd_count` positive. The render node is opened later by the backend (a node whose render
//! node cannot be opened is skipped there, as containers hide nodes).

use core::fmt::Write as _;

use crate::error::{KfdError, Op};
use crate::sys::{Errno, Sys};

/// Root of the topology tree.
pub const TOPOLOGY_ROOT: &str = "/sys/devices/virtual/kfd/kfd/topology";
/// Nodes probed at most.
pub const MAX_NODES: u32 = 64;

/// The properties of a GPU node the backend uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeProps {
    /// `gfx_target_version` (e.g. 90010 for gfx90a).
    pub gfx_target_version: u32,
    /// SIMDs.
    pub simd_count: u32,
    /// SIMDs per CU.
    pub simd_per_cu: u32,
    /// Waves per SIMD.
    pub max_waves_per_simd: u32,
    /// Shader arrays.
    pub array_count: u32,
    /// Shader arrays per engine.
    pub simd_arrays_per_engine: u32,
    /// LDS per work-group, KiB.
    pub lds_size_in_kb: u32,
    /// XCCs per node (1 if the key is missing).
    pub num_xcc: u32,
    /// `/dev/dri/renderD<minor>`.
    pub drm_render_minor: u32,
    /// Bytes of VRAM (heap types 1 and 2 of `mem_banks/*`).
    pub vram_bytes: u64,
}

/// A GPU found in the topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuNode {
    /// Topology node number.
    pub node: u32,
    /// KFD gpu id.
    pub gpu_id: u32,
    /// Its properties.
    pub props: NodeProps,
}

/// Queue-buffer sizes for one node (§1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSizes {
    /// `ctl_stack_size` (must equal the kernel's).
    pub ctl_stack_size: u32,
    /// Per-XCC `ctx_save_restore_size`.
    pub cwsr_size: u32,
    /// Debugger bytes per XCC.
    pub debug_memory_size: u32,
    /// Bytes of the CWSR buffer (all XCCs, debugger areas included).
    pub cwsr_bo_size: u64,
    /// EOP buffer bytes (4096 on GFX8+).
    pub eop_size: u64,
}

const fn align(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

impl NodeProps {
    /// Compute units.
    pub const fn cu_count(&self) -> u32 {
        match self.simd_per_cu {
            0 => 0,
            n => self.simd_count / n,
        }
    }

    /// `kfd_queue_ctx_save_restore_size` (§1.5).
    pub fn queue_sizes(&self) -> QueueSizes {
        let gfxv = self.gfx_target_version;
        let xcc = u64::from(self.num_xcc.max(1));
        let cu_num = u64::from(self.cu_count()) / xcc;
        let engines = u64::from(self.array_count / self.simd_arrays_per_engine.max(1));
        let wave_num = if gfxv < 100100 { (cu_num * 40).min(engines * 512) } else { cu_num * 32 };
        let vgpr_per_cu: u64 = match gfxv {
            90008 | 90010 | 90402 | 90500 => 0x80000,
            110000 | 110001 | 120000 | 120001 => 0x60000,
            _ => 0x40000,
        };
        let lds_per_cu: u64 = if gfxv == 90500 { u64::from(self.lds_size_in_kb) << 10 } else { 0x10000 };
        let wg_data = align(cu_num * (vgpr_per_cu + 0x4000 + lds_per_cu + 0x1000), 4096);
        let per_wave = if gfxv >= 100100 { 12 } else { 8 };
        let mut ctl = align(40 + wave_num * per_wave + 8, 4096);
        if gfxv / 10000 == 10 {
            ctl = ctl.min(0x7000);
        }
        let debug = align(wave_num * 32, 64);
        let cwsr = ctl + wg_data;
        QueueSizes {
            ctl_stack_size: ctl as u32,
            cwsr_size: cwsr as u32,
            debug_memory_size: debug as u32,
            cwsr_bo_size: align((cwsr + debug) * xcc, 4096),
            eop_size: 4096,
        }
    }

    /// Doorbells and CU masks on GFX10+ count work-group processors (CU pairs).
    pub const fn has_wgp(&self) -> bool {
        self.gfx_target_version >= 100000
    }
}

/// A short path built on the stack.
pub(crate) type Path = heapless::String<160>;

pub(crate) fn node_path(node: u32, file: &str) -> Result<Path, KfdError> {
    let mut p = Path::new();
    write!(p, "{TOPOLOGY_ROOT}/nodes/{node}/{file}").map_err(|_| KfdError::Capacity("sysfs path"))?;
    Ok(p)
}

/// Parses `key value` lines (THUNK reads them with `"%s %llu"`); calls `f` for each pair.
pub fn parse_properties(text: &str, mut f: impl FnMut(&str, u64)) {
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        if let (Some(k), Some(v)) = (it.next(), it.next()) {
            if let Ok(v) = v.parse::<u64>() {
                f(k, v);
            }
        }
    }
}

fn read_text<'b, S: Sys>(sys: &S, path: &str, buf: &'b mut [u8]) -> Result<&'b str, Errno> {
    let n = sys.read_file(path, buf)?;
    let bytes = buf.get(..n).ok_or(Errno::EINVAL)?;
    core::str::from_utf8(bytes).map_err(|_| Errno::EINVAL)
}

/// Reads one node; `Ok(None)` for the CPU node or a node without SIMDs, `Err(ENOENT)` past the
/// last node.
pub fn read_node<S: Sys>(sys: &S, node: u32) -> Result<Option<GpuNode>, KfdError> {
    let mut buf = [0u8; 4096];
    let sys_err = |errno| KfdError::Sys { op: Op::Topology, errno };
    let gpu_id = {
        let text = read_text(sys, &node_path(node, "gpu_id")?, &mut buf).map_err(sys_err)?;
        text.trim().parse::<u32>().map_err(|_| sys_err(Errno::EINVAL))?
    };
    if gpu_id == 0 {
        return Ok(None);
    }
    let mut p = NodeProps { num_xcc: 1, ..NodeProps::default() };
    {
        let text = read_text(sys, &node_path(node, "properties")?, &mut buf).map_err(sys_err)?;
        parse_properties(text, |k, v| {
            let v32 = v as u32;
            match k {
                "gfx_target_version" => p.gfx_target_version = v32,
                "simd_count" => p.simd_count = v32,
                "simd_per_cu" => p.simd_per_cu = v32,
                "max_waves_per_simd" => p.max_waves_per_simd = v32,
                "array_count" => p.array_count = v32,
                "simd_arrays_per_engine" => p.simd_arrays_per_engine = v32,
                "lds_size_in_kb" => p.lds_size_in_kb = v32,
                "num_xcc" => p.num_xcc = v32.max(1),
                "drm_render_minor" => p.drm_render_minor = v32,
                _ => {}
            }
        });
    }
    if p.simd_count == 0 {
        return Ok(None);
    }
    // `local_mem_size` prints 0: sum the frame-buffer heaps of the memory banks.
    for bank in 0..16u32 {
        let mut file = Path::new();
        write!(file, "mem_banks/{bank}/properties").map_err(|_| KfdError::Capacity("sysfs path"))?;
        let Ok(text) = read_text(sys, &node_path(node, &file)?, &mut buf) else { break };
        let (mut heap, mut size) = (0u64, 0u64);
        parse_properties(text, |k, v| match k {
            "heap_type" => heap = v,
            "size_in_bytes" => size = v,
            _ => {}
        });
        if heap == 1 || heap == 2 {
            p.vram_bytes = p.vram_bytes.saturating_add(size);
        }
    }
    Ok(Some(GpuNode { node, gpu_id, props: p }))
}

/// Calls `f` for every GPU node in topology order. No topology at all is `NoDevice`.
pub fn discover<S: Sys>(sys: &S, mut f: impl FnMut(GpuNode) -> Result<(), KfdError>) -> Result<(), KfdError> {
    for node in 0..MAX_NODES {
        match read_node(sys, node) {
            Ok(Some(g)) => f(g)?,
            Ok(None) => {}
            Err(KfdError::Sys { errno: Errno::ENOENT, .. }) if node == 0 => return Err(KfdError::NoDevice),
            Err(KfdError::Sys { errno: Errno::ENOENT, .. }) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfx1100_sizes_match_a_recorded_rocr_create_queue() {
        let p = NodeProps {
            gfx_target_version: 110000,
            simd_count: 192,
            simd_per_cu: 2,
            array_count: 12,
            simd_arrays_per_engine: 2,
            lds_size_in_kb: 64,
            num_xcc: 1,
            ..NodeProps::default()
        };
        let s = p.queue_sizes();
        assert_eq!(s.ctl_stack_size, 0xA000);
        assert_eq!(s.cwsr_size, 0x2BEA000);
        assert_eq!(s.debug_memory_size, 0x18000);
        assert_eq!(s.cwsr_bo_size, 0x2C02000);
    }
}
