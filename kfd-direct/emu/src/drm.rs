//! The DRM render node as libdrm_amdgpu sees it (docs/rocm-on-emu.md §3.2, §4.9):
//! `DRM_IOCTL_VERSION` (driver `amdgpu` 3.x), `DRM_IOCTL_GET_CLIENT` (authenticated) and
//! `DRM_IOCTL_AMDGPU_INFO` with `ACCEL_WORKING`, `DEV_INFO` (truncated to the caller's
//! `return_size`) and `READ_MMR_REG` for `GB_ADDR_CONFIG`. Every other DRM request is `EINVAL`, as
//! amdgpu answers a query it does not know.

use std::ffi::c_void;

use crate::topology::GpuNode;
use crate::{Errno, SysResult};

/// DRM ioctl type byte (`'d'`).
pub const DRM_IOCTL_BASE: u32 = 0x64;

/// Request numbers.
pub mod nr {
    /// `DRM_IOCTL_VERSION`.
    pub const VERSION: u32 = 0x00;
    /// `DRM_IOCTL_GET_CLIENT`.
    pub const GET_CLIENT: u32 = 0x05;
    /// `DRM_IOCTL_AMDGPU_INFO` (`DRM_COMMAND_BASE + 5`).
    pub const AMDGPU_INFO: u32 = 0x45;
}

/// `AMDGPU_INFO_*` queries answered.
pub mod query {
    /// `AMDGPU_INFO_ACCEL_WORKING`.
    pub const ACCEL_WORKING: u32 = 0x00;
    /// `AMDGPU_INFO_READ_MMR_REG`.
    pub const READ_MMR_REG: u32 = 0x15;
    /// `AMDGPU_INFO_DEV_INFO`.
    pub const DEV_INFO: u32 = 0x16;
}

/// `mmGB_ADDR_CONFIG` dword offset on gfx9.
pub const GB_ADDR_CONFIG_REG: u32 = 0x263e;
/// `AMDGPU_FAMILY_AI` (gfx9).
pub const FAMILY_AI: u32 = 141;
/// `AMDGPU_FAMILY_GC_11_0_0`.
pub const FAMILY_GC_11: u32 = 145;
/// DRM driver version reported (amdgpu 3.49, Linux 6.1).
pub const DRIVER_VERSION: (i32, i32, i32) = (3, 49, 0);

/// Size of `struct drm_amdgpu_info_device` as written (up to `high_va_max`, 8-aligned).
pub const DEV_INFO_BYTES: usize = 352;

fn user_ok(addr: u64, len: u64) -> bool {
    addr >= 4096 && addr.checked_add(len).is_some_and(|e| e <= 1 << 47)
}

fn read_user(addr: u64, len: usize) -> SysResult<Vec<u8>> {
    if !user_ok(addr, len as u64) {
        return Err(Errno::EFAULT);
    }
    let mut v = vec![0u8; len];
    // SAFETY: the caller of the ioctl vouches for the memory its argument names.
    unsafe {
        std::ptr::copy_nonoverlapping(std::ptr::with_exposed_provenance::<u8>(addr as usize), v.as_mut_ptr(), len)
    };
    Ok(v)
}

fn write_user(addr: u64, data: &[u8]) -> SysResult<()> {
    if data.is_empty() {
        return Ok(());
    }
    if !user_ok(addr, data.len() as u64) {
        return Err(Errno::EFAULT);
    }
    // SAFETY: as in `read_user`, for writable memory.
    unsafe {
        std::ptr::copy_nonoverlapping(data.as_ptr(), std::ptr::with_exposed_provenance_mut(addr as usize), data.len())
    };
    Ok(())
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// PCI revision the emulated parts report (with `device_id`, the `amdgpu.ids` key).
pub fn pci_rev(node: &GpuNode) -> u32 {
    match node.props.device_id {
        0x740f => 0x02,
        0x740c => 0x01,
        0x744c => 0xc8,
        _ => 0x00,
    }
}

/// `struct drm_amdgpu_info_device` for a node.
pub fn dev_info(node: &GpuNode) -> [u8; DEV_INFO_BYTES] {
    let p = &node.props;
    let mut b = [0u8; DEV_INFO_BYTES];
    let se = (p.array_count / p.simd_arrays_per_engine).max(1);
    put32(&mut b, 0, p.device_id);
    put32(&mut b, 4, 0); // chip_rev
    put32(&mut b, 8, 0x3c); // external_rev
    put32(&mut b, 12, pci_rev(node));
    put32(&mut b, 16, if p.gfx_target_version >= 110000 { FAMILY_GC_11 } else { FAMILY_AI });
    put32(&mut b, 20, se);
    put32(&mut b, 24, p.simd_arrays_per_engine);
    put32(&mut b, 28, (crate::GPU_CLOCK_HZ / 1000) as u32); // gpu_counter_freq, kHz
    put64(&mut b, 32, u64::from(p.max_engine_clk_fcompute) * 1000);
    put64(&mut b, 40, 1_600_000);
    put32(&mut b, 48, p.cu_count());
    // cu_bitmap[se][sh]: cu_per_simd_array bits per shader array.
    let mask = if p.cu_per_simd_array >= 32 { u32::MAX } else { (1u32 << p.cu_per_simd_array) - 1 };
    for i in 0..p.array_count.min(16) {
        let (s, a) = ((i / p.simd_arrays_per_engine) % 4, i % p.simd_arrays_per_engine % 4);
        put32(&mut b, 56 + (s as usize * 4 + a as usize) * 4, mask);
    }
    put32(&mut b, 52, mask);
    put32(&mut b, 120, 0xffff); // enabled_rb_pipes_mask
    put32(&mut b, 124, 16);
    put32(&mut b, 128, 8);
    put64(&mut b, 144, 0x20_0000); // virtual_address_offset
    put64(&mut b, 152, 1 << 47); // virtual_address_max
    put32(&mut b, 160, 4096);
    put32(&mut b, 164, 9);
    put32(&mut b, 168, 4096);
    put32(&mut b, 176, 6); // HBM
    put32(&mut b, 180, 4096);
    put32(&mut b, 240, p.wave_front_size);
    put32(&mut b, 244, 512);
    put32(&mut b, 248, p.cu_per_simd_array);
    put32(&mut b, 252, 16);
    put64(&mut b, 336, 0xffff_8000_0000_0000);
    put64(&mut b, 344, 0xffff_ffff_ffe0_0000);
    b
}

/// A DRM ioctl on a render fd of `node`.
///
/// # Safety
/// As [`crate::Emu::ioctl`]: `arg` and the pointers inside it name memory of the sizes used.
pub(crate) unsafe fn ioctl(node: &GpuNode, request: u64, arg: *mut c_void) -> SysResult<i32> {
    let nr = (request & 0xff) as u32;
    let size = ((request >> 16) & 0x3fff) as usize;
    let addr = arg as u64;
    match nr {
        nr::VERSION => {
            let mut b = read_user(addr, size.max(64))?;
            put32(&mut b, 0, DRIVER_VERSION.0 as u32);
            put32(&mut b, 4, DRIVER_VERSION.1 as u32);
            put32(&mut b, 8, DRIVER_VERSION.2 as u32);
            for (i, s) in [&b"amdgpu"[..], b"20150101", b"AMD GPU"].iter().enumerate() {
                let off = 16 + i * 16;
                let cap = u64_at(&b, off) as usize;
                let ptr = u64_at(&b, off + 8);
                if ptr != 0 && cap > 0 {
                    write_user(ptr, &s[..s.len().min(cap)])?;
                }
                put64(&mut b, off, s.len() as u64);
            }
            write_user(addr, &b[..64])?;
            Ok(0)
        }
        nr::GET_CLIENT => {
            let mut b = read_user(addr, 40)?;
            if u32_at(&b, 0) != 0 {
                return Err(Errno::EINVAL);
            }
            put32(&mut b, 4, 1);
            put64(&mut b, 8, u64::from(std::process::id()));
            // SAFETY: getuid has no preconditions.
            put64(&mut b, 16, u64::from(unsafe { libc::getuid() }));
            write_user(addr, &b)?;
            Ok(0)
        }
        nr::AMDGPU_INFO => {
            let b = read_user(addr, 32)?;
            let ret = u64_at(&b, 0);
            let ret_size = u32_at(&b, 8) as usize;
            match u32_at(&b, 12) {
                query::ACCEL_WORKING => write_user(ret, &1u32.to_le_bytes()[..ret_size.min(4)])?,
                query::DEV_INFO => {
                    let info = dev_info(node);
                    write_user(ret, &info[..ret_size.min(DEV_INFO_BYTES)])?;
                }
                query::READ_MMR_REG => {
                    let (reg, count) = (u32_at(&b, 16), u32_at(&b, 20) as usize);
                    if count == 0 || count > 128 || ret_size < count * 4 {
                        return Err(Errno::EINVAL);
                    }
                    let mut out = vec![0u8; count * 4];
                    for i in 0..count {
                        if reg + i as u32 == GB_ADDR_CONFIG_REG {
                            put32(&mut out, i * 4, crate::dialect::GB_ADDR_CONFIG);
                        }
                    }
                    write_user(ret, &out)?;
                }
                _ => return Err(Errno::EINVAL),
            }
            Ok(0)
        }
        _ => Err(Errno::EINVAL),
    }
}
