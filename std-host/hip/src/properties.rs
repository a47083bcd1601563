//! What a device is: `hipGetDeviceProperties` with HIP 5.2's `hipDeviceProp_t` (792 bytes, the
//! layout Debian's header declares), `hipDeviceGetAttribute`, `hipDeviceGetLimit` /
//! `hipDeviceSetLimit` (what a kernel uses is `crate::function`'s).
//!
//! Values come from the device's KFD topology node (`properties`, the memory bank, the L2
//! cache), read through the backend's system interface (the emulator answers with its own
//! topology), and from the ISA; a field aqueduct cannot back is 0 — textures, cooperative and
//! managed memory, pageable-memory access, ECC (HIP 5.2 reports 0 too). The device name is the
//! marketing name libdrm's `amdgpu.ids` gives the PCI device id, as HIP's is; without that file,
//! the topology node's name.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use aqueduct_kfd::Sys;
use aqueduct_std::select::AnyBackend;

use crate::error::{api, Hip, HipResult, INVALID_DEVICE, INVALID_VALUE};
use crate::global::{global, lock, Global};
use crate::put;

/// `hipDeviceArch_t`: 17 one-bit fields in declaration order.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceArch(u32);

/// `hipDeviceProp_t` of HIP 5.2 (field names as in the header).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(non_snake_case, missing_docs)]
pub struct DeviceProp {
    pub name: [c_char; 256],
    pub totalGlobalMem: usize,
    pub sharedMemPerBlock: usize,
    pub regsPerBlock: c_int,
    pub warpSize: c_int,
    pub maxThreadsPerBlock: c_int,
    pub maxThreadsDim: [c_int; 3],
    pub maxGridSize: [c_int; 3],
    pub clockRate: c_int,
    pub memoryClockRate: c_int,
    pub memoryBusWidth: c_int,
    pub totalConstMem: usize,
    pub major: c_int,
    pub minor: c_int,
    pub multiProcessorCount: c_int,
    pub l2CacheSize: c_int,
    pub maxThreadsPerMultiProcessor: c_int,
    pub computeMode: c_int,
    pub clockInstructionRate: c_int,
    pub arch: DeviceArch,
    pub concurrentKernels: c_int,
    pub pciDomainID: c_int,
    pub pciBusID: c_int,
    pub pciDeviceID: c_int,
    pub maxSharedMemoryPerMultiProcessor: usize,
    pub isMultiGpuBoard: c_int,
    pub canMapHostMemory: c_int,
    pub gcnArch: c_int,
    pub gcnArchName: [c_char; 256],
    pub integrated: c_int,
    pub cooperativeLaunch: c_int,
    pub cooperativeMultiDeviceLaunch: c_int,
    pub maxTexture1DLinear: c_int,
    pub maxTexture1D: c_int,
    pub maxTexture2D: [c_int; 2],
    pub maxTexture3D: [c_int; 3],
    pub hdpMemFlushCntl: *mut c_uint,
    pub hdpRegFlushCntl: *mut c_uint,
    pub memPitch: usize,
    pub textureAlignment: usize,
    pub texturePitchAlignment: usize,
    pub kernelExecTimeoutEnabled: c_int,
    pub ECCEnabled: c_int,
    pub tccDriver: c_int,
    pub cooperativeMultiDeviceUnmatchedFunc: c_int,
    pub cooperativeMultiDeviceUnmatchedGridDim: c_int,
    pub cooperativeMultiDeviceUnmatchedBlockDim: c_int,
    pub cooperativeMultiDeviceUnmatchedSharedMem: c_int,
    pub isLargeBar: c_int,
    pub asicRevision: c_int,
    pub managedMemory: c_int,
    pub directManagedMemAccessFromHost: c_int,
    pub concurrentManagedAccess: c_int,
    pub pageableMemoryAccess: c_int,
    pub pageableMemoryAccessUsesHostPageTables: c_int,
}

const _: () = assert!(size_of::<DeviceProp>() == 792);

// SAFETY: the two pointers are always NULL (no HDP registers are exposed); the rest is plain data.
unsafe impl Send for DeviceProp {}
// SAFETY: as above.
unsafe impl Sync for DeviceProp {}

/// The `hipDeviceArch_t` bits HIP sets for every GCN/CDNA/RDNA device: all but funnel shift
/// (11), the extended `__syncthreads` (13), surface functions (14) and dynamic parallelism (16).
const ARCH_FLAGS: u32 = 0x1_ffff & !((1 << 11) | (1 << 13) | (1 << 14) | (1 << 16));

/// What the topology says about one GPU node.
#[derive(Debug, Default)]
struct Topology {
    /// `nodes/N/properties`.
    props: HashMap<String, u64>,
    /// `nodes/N/name`.
    name: String,
    /// `mem_banks/0/properties`.
    memory: HashMap<String, u64>,
    /// Bytes of the L2 cache (`caches/*/properties`, level 2).
    l2_bytes: u64,
}

const TOPOLOGY: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";

fn parse(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.to_owned(), it.next()?.parse().ok()?))
        })
        .collect()
}

/// Reads node `node` through `read(path)`.
fn read_node(node: u32, read: impl Fn(&str) -> Option<String>) -> Option<Topology> {
    let dir = format!("{TOPOLOGY}/{node}");
    let props = parse(&read(&format!("{dir}/properties"))?);
    let name = read(&format!("{dir}/name")).map(|n| n.trim().to_owned()).unwrap_or_default();
    let memory = read(&format!("{dir}/mem_banks/0/properties")).map(|t| parse(&t)).unwrap_or_default();
    let caches = props.get("caches_count").copied().unwrap_or(0).min(64);
    let l2_bytes = (0..caches)
        .filter_map(|i| read(&format!("{dir}/caches/{i}/properties")).map(|t| parse(&t)))
        .find(|c| c.get("level") == Some(&2))
        .and_then(|c| c.get("size").map(|kib| kib * 1024))
        .unwrap_or(0);
    Some(Topology { props, name, memory, l2_bytes })
}

fn sys_reader<S: Sys>(sys: &S) -> impl Fn(&str) -> Option<String> + '_ {
    move |path| {
        let mut buf = vec![0u8; 16 << 10];
        let n = sys.read_file(path, &mut buf).ok()?;
        String::from_utf8(buf.get(..n)?.to_vec()).ok()
    }
}

/// The topology of `device`: through kfd-direct's system interface (the emulator's, or the
/// kernel's), or, under ROCr, from sysfs, where GPU agents come in node order.
fn topology(g: &Global, device: u32) -> Option<Topology> {
    match g.rt.backend() {
        AnyBackend::Emu(k) => read_node(k.node(device)?.node, sys_reader(k.sys())),
        AnyBackend::Kfd(k) => read_node(k.node(device)?.node, sys_reader(k.sys())),
        AnyBackend::Rocr(_) => {
            let read = |p: &str| std::fs::read_to_string(p).ok();
            let gpus = (0..64u32).map_while(|n| read(&format!("{TOPOLOGY}/{n}/gpu_id")).map(|id| (n, id)));
            let node = gpus.filter(|(_, id)| id.trim() != "0").nth(device as usize)?.0;
            read_node(node, read)
        }
    }
}

/// One value of `device`'s topology node properties (`unique_id`, `location_id`, `domain` …).
pub(crate) fn topology_value(g: &Global, device: u32, key: &str) -> Option<u64> {
    topology(g, device)?.props.get(key).copied()
}

/// The marketing name of PCI device `id` in libdrm's `amdgpu.ids` (`DEVICE, REVISION, NAME`).
fn marketing_name(id: u64) -> Option<String> {
    let text = std::fs::read_to_string("/usr/share/libdrm/amdgpu.ids").ok()?;
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let mut f = l.splitn(3, ',').map(str::trim);
        let dev = u64::from_str_radix(f.next()?, 16).ok()?;
        let _revision = f.next()?;
        (dev == id).then(|| f.next().map(str::to_owned)).flatten()
    })
}

/// Copies `s` into a C string field (NUL-terminated, truncated to fit).
fn c_field<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (o, b) in out.iter_mut().zip(s.bytes().take(N - 1)) {
        *o = b as c_char;
    }
    out
}

/// VGPRs a wave may address: 512 on gfx90a and gfx94x (unified with the accumulation
/// registers), 256 elsewhere.
fn addressable_vgprs(gfx_target_version: u32) -> u32 {
    match gfx_target_version {
        90010 | 90400..=90402 => 512,
        _ => 256,
    }
}

/// `hipDeviceProp_t` of `device`.
pub(crate) fn properties(g: &Global, device: u32) -> HipResult<Arc<DeviceProp>> {
    static CACHE: LazyLock<Mutex<HashMap<u32, Arc<DeviceProp>>>> = LazyLock::new(Default::default);
    if device >= g.rt.device_count()? {
        return Err(INVALID_DEVICE);
    }
    if let Some(p) = lock(&CACHE).get(&device) {
        return Ok(p.clone());
    }
    let info = g.rt.device_info(device)?;
    let t = topology(g, device).unwrap_or_default();
    let prop = |k: &str| t.props.get(k).copied().unwrap_or(0);
    let gfx = info.gfx_target_version;
    let (major, minor, stepping) = (gfx / 10000, gfx / 100 % 100, gfx % 100);
    let wave = match prop("wave_front_size") {
        0 if major >= 10 => 32,
        0 => 64,
        w => w,
    };
    let lds = match prop("lds_size_in_kb") {
        0 => 64 << 10,
        kib => kib << 10,
    };
    let waves_per_cu = prop("simd_per_cu") * prop("max_waves_per_simd");
    let location = prop("location_id");
    let name = marketing_name(prop("device_id")).unwrap_or_else(|| t.name.clone());
    // The target id without the triple (`gfx90a:sramecc+:xnack-`), as HIP's gcnArchName.
    let target_id = amdhsa::Processor::from_gfx_target_version(gfx)
        .map(|p| amdhsa::TargetId::device(p, false).to_string())
        .unwrap_or_default();
    let int = |v: u64| c_int::try_from(v).unwrap_or(c_int::MAX);
    let vram = t.memory.get("size_in_bytes").copied().unwrap_or(0);
    let p = DeviceProp {
        name: c_field(&name),
        totalGlobalMem: vram as usize,
        sharedMemPerBlock: lds as usize,
        regsPerBlock: int(u64::from(addressable_vgprs(gfx)) * 4 * 64),
        warpSize: int(wave),
        maxThreadsPerBlock: 1024,
        maxThreadsDim: [1024; 3],
        maxGridSize: [c_int::MAX; 3],
        clockRate: int(prop("max_engine_clk_fcompute") * 1000),
        memoryClockRate: int(t.memory.get("mem_clk_max").copied().unwrap_or(0) * 1000),
        memoryBusWidth: int(t.memory.get("width").copied().unwrap_or(0)),
        totalConstMem: c_int::MAX as usize,
        major: int(major.into()),
        minor: int(minor.into()),
        multiProcessorCount: int(info.cu_count.into()),
        l2CacheSize: int(t.l2_bytes),
        maxThreadsPerMultiProcessor: int(wave * waves_per_cu),
        computeMode: 0,
        clockInstructionRate: int(info.timestamp_frequency / 1000),
        arch: DeviceArch(ARCH_FLAGS),
        concurrentKernels: 1,
        pciDomainID: int(prop("domain")),
        pciBusID: int(location >> 8),
        pciDeviceID: int((location >> 3) & 0x1f),
        maxSharedMemoryPerMultiProcessor: lds as usize,
        isMultiGpuBoard: 0,
        canMapHostMemory: 1,
        gcnArch: int((major * 100 + minor * 10 + stepping).into()),
        gcnArchName: c_field(target_id.strip_prefix("amdgcn-amd-amdhsa--").unwrap_or(&target_id)),
        integrated: 0,
        cooperativeLaunch: 0,
        cooperativeMultiDeviceLaunch: 0,
        maxTexture1DLinear: 0,
        maxTexture1D: 0,
        maxTexture2D: [0; 2],
        maxTexture3D: [0; 3],
        hdpMemFlushCntl: std::ptr::null_mut(),
        hdpRegFlushCntl: std::ptr::null_mut(),
        memPitch: c_int::MAX as usize,
        textureAlignment: 256,
        texturePitchAlignment: 256,
        kernelExecTimeoutEnabled: 0,
        ECCEnabled: 0,
        tccDriver: 0,
        cooperativeMultiDeviceUnmatchedFunc: 0,
        cooperativeMultiDeviceUnmatchedGridDim: 0,
        cooperativeMultiDeviceUnmatchedBlockDim: 0,
        cooperativeMultiDeviceUnmatchedSharedMem: 0,
        isLargeBar: 0,
        asicRevision: 0,
        // hipMallocManaged works (memory the host and every device reach in place), as HIP 5.2
        // reports on this device; nothing migrates, so concurrent managed access stays 0.
        managedMemory: 1,
        directManagedMemAccessFromHost: 0,
        concurrentManagedAccess: 0,
        pageableMemoryAccess: 0,
        pageableMemoryAccessUsesHostPageTables: 0,
    };
    let p = Arc::new(p);
    lock(&CACHE).insert(device, p.clone());
    Ok(p)
}

/// `hipGetDeviceProperties` (HIP 5.2's struct).
///
/// # Safety
/// `prop` is NULL or valid for writing a `hipDeviceProp_t`.
#[no_mangle]
pub unsafe extern "C" fn hipGetDeviceProperties(prop: *mut DeviceProp, device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if prop.is_null() {
            return Err(INVALID_VALUE);
        }
        let device = u32::try_from(device).map_err(|_| INVALID_DEVICE)?;
        let p = properties(g, device)?;
        // SAFETY: the caller's contract.
        unsafe { put(prop, *p) }
    })
}

/// `hipDeviceGetAttribute`: the attributes HIP answers from the properties, plus
/// `CanUseStreamWaitValue` (1), `ImageSupport` (0) and `PhysicalMultiProcessorCount`; any other
/// is `hipErrorInvalidValue`, as in HIP.
///
/// # Safety
/// `value` is NULL or valid for writes (of a pointer, for the two HDP register attributes).
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetAttribute(value: *mut c_int, attr: c_int, device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if value.is_null() {
            return Err(INVALID_VALUE);
        }
        let device = u32::try_from(device).map_err(|_| INVALID_DEVICE)?;
        let p = properties(g, device)?;
        if attr == 10005 || attr == 10006 {
            // HdpMemFlushCntl / HdpRegFlushCntl: a pointer through the int pointer, as HIP does.
            // SAFETY: the caller's contract for these attributes.
            return unsafe { put(value.cast::<*mut c_uint>(), std::ptr::null_mut()) };
        }
        let v = attribute(&p, attr).ok_or(INVALID_VALUE)?;
        // SAFETY: the caller's contract.
        unsafe { put(value, v) }
    })
}

/// An attribute's value (HIP 5.2's `hipDeviceAttribute_t` numbering), `None` for those HIP
/// does not answer.
fn attribute(p: &DeviceProp, attr: c_int) -> Option<c_int> {
    let clamp = |v: usize| c_int::try_from(v).unwrap_or(c_int::MAX);
    Some(match attr {
        0 => p.ECCEnabled,
        3 => p.canMapHostMemory,
        5 => p.clockRate,
        6 => p.computeMode,
        8 => p.concurrentKernels,
        9 => p.concurrentManagedAccess,
        10 => p.cooperativeLaunch,
        11 => p.cooperativeMultiDeviceLaunch,
        13 => p.directManagedMemAccessFromHost,
        16 => p.integrated,
        17 => p.isMultiGpuBoard,
        18 => p.kernelExecTimeoutEnabled,
        19 => p.l2CacheSize,
        23 => p.major,
        24 => p.managedMemory,
        26..=28 => p.maxThreadsDim[(attr - 26) as usize],
        29..=31 => p.maxGridSize[(attr - 29) as usize],
        39 => p.maxTexture1D,
        44 => p.maxTexture2D[0],
        45 => p.maxTexture2D[1],
        50..=52 => p.maxTexture3D[(attr - 50) as usize],
        56 => p.maxThreadsPerBlock,
        57 => p.maxThreadsPerMultiProcessor,
        58 => clamp(p.memPitch),
        59 => p.memoryBusWidth,
        60 => p.memoryClockRate,
        61 => p.minor,
        63 => p.multiProcessorCount,
        65 => p.pageableMemoryAccess,
        66 => p.pageableMemoryAccessUsesHostPageTables,
        67 => p.pciBusID,
        68 => p.pciDeviceID,
        71 => p.regsPerBlock,
        74 => clamp(p.sharedMemPerBlock),
        81 => clamp(p.textureAlignment),
        82 => clamp(p.texturePitchAlignment),
        83 => clamp(p.totalConstMem),
        87 => p.warpSize,
        10000 => p.clockInstructionRate,
        10002 => clamp(p.maxSharedMemoryPerMultiProcessor),
        10007 => p.cooperativeMultiDeviceUnmatchedFunc,
        10008 => p.cooperativeMultiDeviceUnmatchedGridDim,
        10009 => p.cooperativeMultiDeviceUnmatchedBlockDim,
        10010 => p.cooperativeMultiDeviceUnmatchedSharedMem,
        10012 => p.asicRevision,
        // hipStreamWaitValue32/64 are served.
        10013 => 1,
        // No images (textures, surfaces).
        10014 => 0,
        10015 => p.multiProcessorCount,
        _ => return None,
    })
}

/// `hipLimitStackSize` (newer HIP), `hipLimitPrintfFifoSize`, `hipLimitMallocHeapSize`.
const LIMIT_STACK_SIZE: c_uint = 0;
const LIMIT_MALLOC_HEAP_SIZE: c_uint = 2;
const LIMIT_RANGE: c_uint = 3;
/// `hipErrorUnsupportedLimit`.
const UNSUPPORTED_LIMIT: Hip = Hip(215);

/// The default per-thread stack of kernels with a dynamic stack (`hipLimitStackSize`), bytes.
const DEFAULT_STACK_SIZE: usize = 1024;
/// The largest stack size HIP documents (128 KiB less 16 bytes).
const MAX_STACK_SIZE: usize = (128 << 10) - 16;

/// `hipLimitStackSize` (process-wide: every device gets the same).
static STACK_SIZE: AtomicUsize = AtomicUsize::new(DEFAULT_STACK_SIZE);

/// The stack a kernel with a dynamic stack gets per work-item, in bytes.
pub(crate) fn stack_size_limit() -> u32 {
    // Ordering: Relaxed; a launch reads whichever value was set before it, as HIP's does.
    STACK_SIZE.load(Ordering::Relaxed) as u32
}

/// `hipDeviceGetLimit`: the malloc heap limit is the device's memory (as HIP reports it); the
/// stack size is what `hipDeviceSetLimit` set, 1024 bytes by default; the printf FIFO is
/// `hipErrorUnsupportedLimit`.
///
/// # Safety
/// `value` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetLimit(value: *mut usize, limit: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        if value.is_null() || limit >= LIMIT_RANGE {
            return Err(INVALID_VALUE);
        }
        let v = match limit {
            LIMIT_MALLOC_HEAP_SIZE => properties(g, g.rt.device()?)?.totalGlobalMem,
            LIMIT_STACK_SIZE => STACK_SIZE.load(Ordering::Relaxed),
            _ => return Err(UNSUPPORTED_LIMIT),
        };
        // SAFETY: the caller's contract.
        unsafe { put(value, v) }
    })
}

/// `hipDeviceSetLimit`: a malloc heap up to the device's memory is accepted (no device-side
/// `malloc` draws on it); a stack size up to 128 KiB − 16 bytes is kept and given to kernels with
/// a dynamic stack from their next launch on (the queue's scratch grows to fit it); the printf
/// FIFO is `hipErrorUnsupportedLimit`.
#[no_mangle]
pub extern "C" fn hipDeviceSetLimit(limit: c_uint, value: usize) -> i32 {
    api(|| {
        let g = global()?;
        if limit >= LIMIT_RANGE {
            return Err(INVALID_VALUE);
        }
        match limit {
            LIMIT_MALLOC_HEAP_SIZE if value <= properties(g, g.rt.device()?)?.totalGlobalMem => Ok(()),
            LIMIT_STACK_SIZE if value <= MAX_STACK_SIZE => {
                // The current device's scratch grows to hold the stack before any launch asks
                // for it (a device whose queues' scratch is not set up here keeps its own).
                match g.rt.reserve_scratch(g.rt.device()?, value as u32) {
                    Ok(()) | Err(aqueduct::Error::NotSupported) => {}
                    Err(e) => return Err(e.into()),
                }
                // Ordering: Relaxed; launches resolved before see the change once the epoch moves.
                STACK_SIZE.store(value, Ordering::Relaxed);
                crate::global::invalidate_launches();
                Ok(())
            }
            LIMIT_MALLOC_HEAP_SIZE | LIMIT_STACK_SIZE => Err(INVALID_VALUE),
            _ => Err(UNSUPPORTED_LIMIT),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn device_prop_has_hip_5_2_offsets() {
        assert_eq!(offset_of!(DeviceProp, totalGlobalMem), 256);
        assert_eq!(offset_of!(DeviceProp, regsPerBlock), 272);
        assert_eq!(offset_of!(DeviceProp, maxGridSize), 296);
        assert_eq!(offset_of!(DeviceProp, totalConstMem), 320);
        assert_eq!(offset_of!(DeviceProp, clockInstructionRate), 352);
        assert_eq!(offset_of!(DeviceProp, arch), 356);
        assert_eq!(offset_of!(DeviceProp, maxSharedMemoryPerMultiProcessor), 376);
        assert_eq!(offset_of!(DeviceProp, gcnArchName), 396);
        assert_eq!(offset_of!(DeviceProp, integrated), 652);
        assert_eq!(offset_of!(DeviceProp, hdpMemFlushCntl), 696);
        assert_eq!(offset_of!(DeviceProp, memPitch), 712);
        assert_eq!(offset_of!(DeviceProp, kernelExecTimeoutEnabled), 736);
        assert_eq!(offset_of!(DeviceProp, isLargeBar), 764);
        assert_eq!(offset_of!(DeviceProp, pageableMemoryAccessUsesHostPageTables), 788);
    }

    #[test]
    fn arch_flags_clear_the_four_hip_leaves_out() {
        assert_eq!(ARCH_FLAGS & (1 << 11), 0);
        assert_eq!(ARCH_FLAGS & (1 << 7), 1 << 7); // hasDoubles
        assert_eq!(ARCH_FLAGS.count_ones(), 13);
    }
}
