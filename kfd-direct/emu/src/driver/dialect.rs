//! The older amdkfd ioctls that ROCm 5.2's libhsakmt issues on top of the upstream set the
//! driver model implements (docs/rocm-on-emu.md §3.1): memory policy, the pre-`_NEW` aperture
//! query, scratch backing, tile configuration, the trap handler, XNACK mode and available memory.
//! Each is validated the way `kfd_chardev.c` validates it (an unknown `gpu_id` is `EINVAL`);
//! none changes what the command processor does. Anything else is unknown (`EINVAL`), which
//! includes the DKMS debugger ioctl 0x82, so ROCr falls back to its legacy queue-error path.

use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::abi::{ProcessDeviceApertures, Request};
use crate::memory::{GPUVM_BASE, GPUVM_LIMIT, LDS_APERTURE_BASE, SCRATCH_APERTURE_BASE};
use crate::{Emu, Errno, SysResult};

/// Request numbers of this module.
pub mod nr {
    /// `AMDKFD_IOC_SET_MEMORY_POLICY`.
    pub const SET_MEMORY_POLICY: u32 = 0x04;
    /// `AMDKFD_IOC_GET_PROCESS_APERTURES` (fixed array of 7).
    pub const GET_PROCESS_APERTURES: u32 = 0x06;
    /// `AMDKFD_IOC_SET_SCRATCH_BACKING_VA`.
    pub const SET_SCRATCH_BACKING_VA: u32 = 0x11;
    /// `AMDKFD_IOC_GET_TILE_CONFIG`.
    pub const GET_TILE_CONFIG: u32 = 0x12;
    /// `AMDKFD_IOC_SET_TRAP_HANDLER`.
    pub const SET_TRAP_HANDLER: u32 = 0x13;
    /// `AMDKFD_IOC_SET_XNACK_MODE`.
    pub const SET_XNACK_MODE: u32 = 0x21;
    /// `AMDKFD_IOC_AVAILABLE_MEMORY`.
    pub const AVAILABLE_MEMORY: u32 = 0x23;
}

/// `GB_ADDR_CONFIG` of the emulated gfx9 parts (a plausible Aldebaran value).
pub const GB_ADDR_CONFIG: u32 = 0x2a11_4042;

/// Tile-mode and macro-tile entries the kernel reports for gfx9 (all zero there).
const TILE_CONFIGS: u32 = 32;
const MACRO_TILE_CONFIGS: u32 = 16;

static XNACK: AtomicI32 = AtomicI32::new(0);

fn user_ok(addr: u64, len: u64) -> bool {
    addr >= 4096 && addr.checked_add(len).is_some_and(|e| e <= 1 << 47)
}

fn read_arg(arg: *mut c_void, len: usize) -> SysResult<Vec<u8>> {
    if !user_ok(arg as u64, len as u64) {
        return Err(Errno::EFAULT);
    }
    let mut v = vec![0u8; len];
    // SAFETY: the ioctl caller vouches for `len` readable bytes at `arg` (Emu::ioctl contract).
    unsafe { std::ptr::copy_nonoverlapping(arg.cast::<u8>(), v.as_mut_ptr(), len) };
    Ok(v)
}

fn write_user(addr: u64, data: &[u8]) -> SysResult<()> {
    if !user_ok(addr, data.len() as u64) {
        return Err(Errno::EFAULT);
    }
    // SAFETY: as in `read_arg`, for writable memory.
    unsafe {
        std::ptr::copy_nonoverlapping(data.as_ptr(), std::ptr::with_exposed_provenance_mut(addr as usize), data.len())
    };
    Ok(())
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4).map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8).map_or(0, |s| {
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        u64::from_le_bytes(a)
    })
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

fn apertures(gpu_id: u32) -> ProcessDeviceApertures {
    ProcessDeviceApertures {
        lds_base: LDS_APERTURE_BASE,
        lds_limit: LDS_APERTURE_BASE + (4 << 30) - 1,
        scratch_base: SCRATCH_APERTURE_BASE,
        scratch_limit: SCRATCH_APERTURE_BASE + (4 << 30) - 1,
        gpuvm_base: GPUVM_BASE,
        gpuvm_limit: GPUVM_LIMIT,
        gpu_id,
        pad: 0,
    }
}

/// Handles an ioctl whose `nr` the upstream table does not know. The fd was already checked.
///
/// # Safety
/// As [`Emu::ioctl`].
pub(crate) unsafe fn ioctl(emu: &Emu, req: Request, arg: *mut c_void) -> SysResult<i32> {
    let known = |gpu: u32| emu.gpus().iter().any(|g| g.gpu_id == gpu);
    let (kernel_size, out) = match req.nr {
        nr::SET_MEMORY_POLICY => (32, false),
        nr::GET_PROCESS_APERTURES => (7 * size_of::<ProcessDeviceApertures>() + 8, true),
        nr::SET_SCRATCH_BACKING_VA => (16, true),
        nr::GET_TILE_CONFIG => (40, true),
        nr::SET_TRAP_HANDLER => (24, false),
        nr::SET_XNACK_MODE => (4, true),
        nr::AVAILABLE_MEMORY => (16, true),
        _ => return Err(Errno::EINVAL),
    };
    let len = req.size;
    let mut b = if req.nr == nr::GET_PROCESS_APERTURES { vec![0u8; len] } else { read_arg(arg, len)? };
    b.resize(len.max(kernel_size), 0);
    match req.nr {
        nr::SET_MEMORY_POLICY => {
            // default_policy / alternate_policy: 0 coherent, 1 non-coherent.
            if !known(u32_at(&b, 16)) {
                return Err(Errno::EINVAL);
            }
            if u32_at(&b, 20) > 1 || u32_at(&b, 24) > 1 {
                return Err(Errno::EINVAL);
            }
        }
        nr::GET_PROCESS_APERTURES => {
            let n = emu.gpus().len().min(7);
            for (i, g) in emu.gpus().iter().take(n).enumerate() {
                let ap = apertures(g.gpu_id);
                let off = i * size_of::<ProcessDeviceApertures>();
                // SAFETY: `off + size_of` is inside `b` (7 entries reserved); plain-integer struct.
                unsafe { std::ptr::write_unaligned(b.as_mut_ptr().add(off).cast::<ProcessDeviceApertures>(), ap) };
            }
            put_u32(&mut b, 7 * size_of::<ProcessDeviceApertures>(), n as u32);
        }
        nr::SET_SCRATCH_BACKING_VA => {
            if !known(u32_at(&b, 8)) {
                return Err(Errno::EINVAL);
            }
        }
        nr::GET_TILE_CONFIG => {
            if !known(u32_at(&b, 24)) {
                return Err(Errno::EINVAL);
            }
            let tiles = u32_at(&b, 16).min(TILE_CONFIGS);
            let macros = u32_at(&b, 20).min(MACRO_TILE_CONFIGS);
            if tiles > 0 {
                write_user(u64_at(&b, 0), &vec![0u8; tiles as usize * 4])?;
            }
            if macros > 0 {
                write_user(u64_at(&b, 8), &vec![0u8; macros as usize * 4])?;
            }
            put_u32(&mut b, 16, tiles);
            put_u32(&mut b, 20, macros);
            put_u32(&mut b, 28, GB_ADDR_CONFIG);
            put_u32(&mut b, 32, 16);
            put_u32(&mut b, 36, 2);
        }
        nr::SET_TRAP_HANDLER => {
            if !known(u32_at(&b, 16)) {
                return Err(Errno::EINVAL);
            }
        }
        nr::SET_XNACK_MODE => {
            let v = u32_at(&b, 0) as i32;
            if v < 0 {
                // Ordering: Relaxed; a mode flag with no data attached.
                put_u32(&mut b, 0, XNACK.load(Ordering::Relaxed) as u32);
            } else {
                XNACK.store(i32::from(v != 0), Ordering::Relaxed);
            }
        }
        nr::AVAILABLE_MEMORY => {
            let gpu = u32_at(&b, 8);
            let g = emu.gpus().iter().find(|g| g.gpu_id == gpu).ok_or(Errno::EINVAL)?;
            put_u64(&mut b, 0, g.props.vram_bytes);
        }
        _ => return Err(Errno::EINVAL),
    }
    if out {
        write_user(arg as u64, &b[..len])?;
    }
    Ok(0)
}
