//! # aqueduct-kfd-preload
//!
//! An `LD_PRELOAD` library that puts the aqueduct emulated AMD GPU ([`aqueduct_kfd_emu::Emu`])
//! under a foreign, unmodified process — Debian's ROCm 5.2 `libhsakmt`, ROCr and HIP, or
//! `rocminfo` (specification: `docs/rocm-on-emu.md` §1–§2).
//!
//! What it routes to the emulator living inside the process:
//!
//! - `open*("/dev/kfd")` and `open*("/dev/dri/renderD<minor>")`: the emulator opens its device
//!   and the process gets a **real** file descriptor (a fresh `memfd`) standing for it. The
//!   emulator's fd is found again from the real fd's inode, so `dup`, `fcntl(F_DUPFD*)` and
//!   `close` work natively on it. A forked child inherits the fd but the emulator answers it
//!   with `EBADF`, as amdkfd does.
//! - `ioctl` and `mmap` on those fds (the render fd's `drm_fd` inside `ACQUIRE_VM` is translated
//!   to the emulator's fd).
//! - The KFD sysfs tree (`/sys/devices/virtual/kfd/kfd/...`, `/sys/class/kfd/kfd/...`) and
//!   `/proc/modules`: the emulator's tree is written once into a private temporary directory
//!   and paths are rewritten into it for `open*`, `fopen*`, `opendir`, `stat*` and `access`, so
//!   `readdir` and `fscanf` run on real files.
//! - `popen("lsmod …")` (rocminfo's module probe): `lsmod` is replaced by a `cat` of that
//!   `/proc/modules`.
//!
//! `stat` of `/dev/kfd`, `/dev/dri` and the render node answers with character-device and
//! directory entries so libdrm never tries to create the nodes.
//!
//! Inside the library nothing calls an interposed entry point for its own work except through
//! the next definition (`dlsym(RTLD_NEXT)`), and the paths it touches itself never match a
//! routed prefix, so there is no recursion.
//!
//! Environment: `AQUEDUCT_GPU` (`gfx90a`, default; `gfx942`, `gfx1100`),
//! `AQUEDUCT_PRELOAD_LOG=1` logs every routed call to stderr, `AQUEDUCT_EMU_STATS=1` prints the
//! emulator's engine counters (SDMA queues, packets, copies, bytes) to stderr at exit.

use std::ffi::{c_char, c_int, c_ulong, c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use aqueduct_kfd_emu::{Emu, EmuConfig, Errno, GpuProfile};

pub mod twins;

/// KFD ABI version the emulator reports to ROCm 5.2 (Debian 12's Linux 6.1 reports 1.11).
pub const KFD_VERSION: (u32, u32) = (1, 11);

const KFD_PATH: &str = "/dev/kfd";
const RENDER_PREFIX: &str = "/dev/dri/renderD";
const SYSFS_ROOTS: [&str; 2] = ["/sys/devices/virtual/kfd/kfd", "/sys/class/kfd/kfd"];
const PROC_MODULES: &str = "/proc/modules";
const MODULES_TEXT: &str = "amdgpu 9764864 0 - Live 0x0000000000000000\namd_iommu_v2 20480 1 amdgpu, Live 0x0000000000000000\ngpu_sched 45056 1 amdgpu, Live 0x0000000000000000\ndrm_ttm_helper 16384 1 amdgpu, Live 0x0000000000000000\n";

fn log_on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("AQUEDUCT_PRELOAD_LOG").is_some_and(|v| v != "0"))
}

macro_rules! log {
    ($($t:tt)*) => {
        if log_on() {
            eprintln!("[aqueduct-preload {}] {}", std::process::id(), format!($($t)*));
        }
    };
}

/// Resolves the next definition of a libc symbol, once.
macro_rules! real {
    ($name:literal, $ty:ty) => {{
        // An item of its own, so the unsafe blocks below never nest inside the caller's.
        fn next() -> $ty {
            static P: AtomicUsize = AtomicUsize::new(0);
            // Ordering: Relaxed; the pointer is idempotent (every thread resolves the same value).
            let mut p = P.load(Ordering::Relaxed);
            if p == 0 {
                // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
                p = unsafe { libc::dlsym(libc::RTLD_NEXT, concat!($name, "\0").as_ptr().cast()) } as usize;
                P.store(p, Ordering::Relaxed);
            }
            assert!(p != 0, concat!("aqueduct-kfd-preload: no next definition of ", $name));
            // SAFETY: `p` is the address of the libc function of that name, whose C type is `$ty`.
            unsafe { std::mem::transmute::<usize, $ty>(p) }
        }
        next()
    }};
}

fn set_errno(e: i32) {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// The emulator of this process.
fn emu() -> &'static Emu {
    static EMU: OnceLock<Emu> = OnceLock::new();
    EMU.get_or_init(|| {
        let profile = match std::env::var("AQUEDUCT_GPU").as_deref() {
            Ok("gfx942") => GpuProfile::Gfx942,
            Ok("gfx1100") => GpuProfile::Gfx1100,
            _ => GpuProfile::Gfx90a,
        };
        let config = EmuConfig::with_gpus(&[profile]).version(KFD_VERSION.0, KFD_VERSION.1);
        log!("emulator up: {profile:?}");
        match Emu::new(config) {
            Ok(e) => {
                for t in twins::user_twins().into_iter().chain(twins::blit_twins()) {
                    e.register_twin_by_name(t);
                }
                if std::env::var_os("AQUEDUCT_EMU_STATS").is_some_and(|v| v != "0") {
                    // SAFETY: registering a plain extern "C" function with no arguments.
                    unsafe { libc::atexit(print_stats) };
                }
                e
            }
            Err(e) => {
                eprintln!("aqueduct-kfd-preload: cannot start the emulated GPU: {e}");
                std::process::abort()
            }
        }
    })
}

/// Prints the emulator's engine counters (`AQUEDUCT_EMU_STATS=1`), at exit.
extern "C" fn print_stats() {
    let s = emu().stats();
    eprintln!(
        "aqueduct-kfd-emu stats: sdma_queues_created={} sdma_packets={} sdma_copies={} sdma_bytes={}",
        s.sdma_queues_created, s.sdma_packets, s.sdma_copies, s.sdma_bytes
    );
}

// ---- fds ---------------------------------------------------------------------------------------

/// Real-fd inode → emulator fd, for every device fd this process opened.
static FDS: Mutex<Vec<(u64, i32)>> = Mutex::new(Vec::new());
static NFDS: AtomicUsize = AtomicUsize::new(0);

fn inode(fd: c_int) -> Option<u64> {
    // SAFETY: an all-zero `stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes the struct we own; a bad fd only fails.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st.st_ino)
}

/// The emulator fd standing behind real fd `fd`, if it is one of ours.
fn emu_fd(fd: c_int) -> Option<i32> {
    // Ordering: Relaxed; a hint that avoids the fstat for processes with no device fd.
    if fd < 0 || NFDS.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let ino = inode(fd)?;
    FDS.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(i, _)| *i == ino).map(|(_, e)| *e)
}

fn open_device(path: &str, flags: c_int) -> c_int {
    let efd = match emu().open(path, flags) {
        Ok(f) => f,
        Err(Errno(e)) => {
            log!("open({path}) = -{e}");
            set_errno(e);
            return -1;
        }
    };
    let name = if path == KFD_PATH { c"kfd" } else { c"amdgpu-render" };
    let mf = if flags & libc::O_CLOEXEC != 0 { libc::MFD_CLOEXEC } else { 0 };
    // SAFETY: memfd_create with a NUL-terminated name.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), mf) };
    if fd < 0 {
        let _ = emu().close(efd);
        return -1;
    }
    let Some(ino) = inode(fd) else {
        return -1;
    };
    FDS.lock().unwrap_or_else(|e| e.into_inner()).push((ino, efd));
    // Ordering: Relaxed; see emu_fd.
    NFDS.fetch_add(1, Ordering::Relaxed);
    log!("open({path}) = {fd} (emu fd {efd:#x})");
    fd
}

// ---- paths -------------------------------------------------------------------------------------

struct Dir {
    base: PathBuf,
    owner: u32,
}

/// The private directory holding `modules` (always) and `kfd/` (written on first use).
fn dir() -> Option<&'static Dir> {
    static DIR: OnceLock<Option<Dir>> = OnceLock::new();
    DIR.get_or_init(|| {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let base = std::env::temp_dir().join(format!("aqueduct-kfd-{}-{nanos:x}", std::process::id()));
        std::fs::create_dir_all(&base).ok()?;
        std::fs::write(base.join("modules"), MODULES_TEXT).ok()?;
        // SAFETY: registering a plain extern "C" function with no arguments.
        unsafe { libc::atexit(cleanup) };
        Some(Dir { base, owner: std::process::id() })
    })
    .as_ref()
}

extern "C" fn cleanup() {
    if let Some(d) = dir() {
        // A forked child exiting must not remove its parent's tree.
        if d.owner == std::process::id() {
            let _ = std::fs::remove_dir_all(&d.base);
        }
    }
}

/// Writes the emulator's topology tree under `<dir>/kfd/topology` once.
fn sysfs_ready(d: &Dir) -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        let e = emu();
        let root = aqueduct_kfd_emu::topology::TOPOLOGY_ROOT;
        fn walk(e: &Emu, path: &str, out: &std::path::Path) -> std::io::Result<()> {
            match e.list_sysfs(path) {
                Ok(names) => {
                    std::fs::create_dir_all(out)?;
                    for n in names {
                        walk(e, &format!("{path}/{n}"), &out.join(&n))?;
                    }
                    Ok(())
                }
                Err(_) => {
                    let mut buf = vec![0u8; 64 << 10];
                    let n = e.read_sysfs(path, &mut buf).map_err(|Errno(x)| std::io::Error::from_raw_os_error(x))?;
                    std::fs::write(out, &buf[..n])
                }
            }
        }
        let ok = walk(e, root, &d.base.join("kfd/topology")).is_ok();
        log!("sysfs tree at {} ({ok})", d.base.display());
        ok
    })
}

/// A routed file path, rewritten into the private directory.
fn rewrite(path: &[u8]) -> Option<CString> {
    let s = std::str::from_utf8(path).ok()?;
    if s == PROC_MODULES {
        let d = dir()?;
        return CString::new(d.base.join("modules").into_os_string().into_encoded_bytes()).ok();
    }
    for root in SYSFS_ROOTS {
        if let Some(rest) = s.strip_prefix(root) {
            if !rest.is_empty() && !rest.starts_with('/') {
                continue;
            }
            let d = dir()?;
            if !sysfs_ready(d) {
                return None;
            }
            let mut p = d.base.join("kfd").into_os_string().into_encoded_bytes();
            p.extend_from_slice(rest.as_bytes());
            return CString::new(p).ok();
        }
    }
    None
}

fn is_device(s: &str) -> bool {
    s == KFD_PATH
        || s.strip_prefix(RENDER_PREFIX).is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
}

/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn cstr<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        return None;
    }
    // SAFETY: caller's contract.
    Some(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// What to do with a path argument.
enum Route {
    Device(String),
    File(CString),
    Pass,
}

/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn route(p: *const c_char) -> Route {
    // SAFETY: caller's contract.
    let Some(b) = (unsafe { cstr(p) }) else { return Route::Pass };
    if b.starts_with(b"/dev/") {
        if let Ok(s) = std::str::from_utf8(b) {
            if is_device(s) {
                return Route::Device(s.to_owned());
            }
        }
        return Route::Pass;
    }
    if !(b.starts_with(b"/sys/") || b.starts_with(b"/proc/")) {
        return Route::Pass;
    }
    match rewrite(b) {
        Some(c) => {
            log!("path {} -> {}", String::from_utf8_lossy(b), c.to_string_lossy());
            Route::File(c)
        }
        None => Route::Pass,
    }
}

// ---- interposers -------------------------------------------------------------------------------

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, libc::mode_t) -> c_int;
type OpenatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, libc::mode_t) -> c_int;

/// `open(2)`, routed (the variadic mode argument is read as a fixed third argument, which is
/// ABI-identical on the supported Linux targets).
///
/// # Safety
/// As `open(2)`.
#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
    // SAFETY: the caller passes a C string.
    match unsafe { route(path) } {
        Route::Device(s) => open_device(&s, flags),
        // SAFETY: forwarding to libc with a valid C string.
        Route::File(c) => unsafe { real!("open", OpenFn)(c.as_ptr(), flags, mode) },
        // SAFETY: forwarding the caller's arguments.
        Route::Pass => unsafe { real!("open", OpenFn)(path, flags, mode) },
    }
}

/// `open64(2)`, routed.
///
/// # Safety
/// As `open(2)`.
#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
    // SAFETY: the caller passes a C string.
    match unsafe { route(path) } {
        Route::Device(s) => open_device(&s, flags),
        // SAFETY: forwarding to libc with a valid C string.
        Route::File(c) => unsafe { real!("open64", OpenFn)(c.as_ptr(), flags, mode) },
        // SAFETY: forwarding the caller's arguments.
        Route::Pass => unsafe { real!("open64", OpenFn)(path, flags, mode) },
    }
}

/// `__open_2` (fortified `open` without a mode), routed.
///
/// # Safety
/// As `open(2)`.
#[no_mangle]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: same contract.
    unsafe { open(path, flags, 0) }
}

/// `__open64_2`, routed.
///
/// # Safety
/// As `open(2)`.
#[no_mangle]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: same contract.
    unsafe { open64(path, flags, 0) }
}

/// `openat(2)`, routed for absolute paths.
///
/// # Safety
/// As `openat(2)`.
#[no_mangle]
pub unsafe extern "C" fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
    // SAFETY: the caller passes a C string.
    match unsafe { route(path) } {
        Route::Device(s) => open_device(&s, flags),
        // SAFETY: forwarding to libc with a valid C string.
        Route::File(c) => unsafe { real!("openat", OpenatFn)(dirfd, c.as_ptr(), flags, mode) },
        // SAFETY: forwarding the caller's arguments.
        Route::Pass => unsafe { real!("openat", OpenatFn)(dirfd, path, flags, mode) },
    }
}

/// `openat64(2)`, routed for absolute paths.
///
/// # Safety
/// As `openat(2)`.
#[no_mangle]
pub unsafe extern "C" fn openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
    // SAFETY: the caller passes a C string.
    match unsafe { route(path) } {
        Route::Device(s) => open_device(&s, flags),
        // SAFETY: forwarding to libc with a valid C string.
        Route::File(c) => unsafe { real!("openat64", OpenatFn)(dirfd, c.as_ptr(), flags, mode) },
        // SAFETY: forwarding the caller's arguments.
        Route::Pass => unsafe { real!("openat64", OpenatFn)(dirfd, path, flags, mode) },
    }
}

type FopenFn = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut libc::FILE;

/// `fopen(3)`, routed (glibc's `fopen` does not go through the interposed `open`).
///
/// # Safety
/// As `fopen(3)`.
#[no_mangle]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    // SAFETY: the caller passes a C string.
    match unsafe { route(path) } {
        // SAFETY: forwarding with a valid C string.
        Route::File(c) => unsafe { real!("fopen", FopenFn)(c.as_ptr(), mode) },
        // SAFETY: forwarding the caller's arguments.
        _ => unsafe { real!("fopen", FopenFn)(path, mode) },
    }
}

/// `fopen64(3)`, routed.
///
/// # Safety
/// As `fopen(3)`.
#[no_mangle]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    // SAFETY: the caller passes a C string.
    match unsafe { route(path) } {
        // SAFETY: forwarding with a valid C string.
        Route::File(c) => unsafe { real!("fopen64", FopenFn)(c.as_ptr(), mode) },
        // SAFETY: forwarding the caller's arguments.
        _ => unsafe { real!("fopen64", FopenFn)(path, mode) },
    }
}

type OpendirFn = unsafe extern "C" fn(*const c_char) -> *mut libc::DIR;

/// `opendir(3)`, routed.
///
/// # Safety
/// As `opendir(3)`.
#[no_mangle]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut libc::DIR {
    // SAFETY: the caller passes a C string.
    match unsafe { route(path) } {
        // SAFETY: forwarding with a valid C string.
        Route::File(c) => unsafe { real!("opendir", OpendirFn)(c.as_ptr()) },
        // SAFETY: forwarding the caller's arguments.
        _ => unsafe { real!("opendir", OpendirFn)(path) },
    }
}

/// Fills a `stat` for a device path; `false` if `s` is not one.
fn fake_stat(s: &str, st: *mut libc::stat) -> bool {
    let (mode, rdev) = if s == KFD_PATH {
        (libc::S_IFCHR | 0o666, libc::makedev(511, 0))
    } else if s == "/dev/dri" {
        (libc::S_IFDIR | 0o755, 0)
    } else if let Some(m) = s.strip_prefix(RENDER_PREFIX).and_then(|m| m.parse::<u32>().ok()) {
        if !emu().gpus().iter().any(|g| g.drm_render_minor == m) {
            return false;
        }
        (libc::S_IFCHR | 0o666, libc::makedev(226, m))
    } else {
        return false;
    };
    // SAFETY: the caller passed a writable `struct stat`; all-zero is a valid value.
    unsafe {
        std::ptr::write(st, std::mem::zeroed());
        (*st).st_mode = mode;
        (*st).st_rdev = rdev;
        (*st).st_nlink = 1;
        (*st).st_blksize = 4096;
    }
    true
}

type StatFn = unsafe extern "C" fn(*const c_char, *mut libc::stat) -> c_int;
type XstatFn = unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat) -> c_int;

/// # Safety
/// `path` is a C string; `st` a writable `struct stat`.
unsafe fn stat_common(path: *const c_char, st: *mut libc::stat, next: impl FnOnce(*const c_char) -> c_int) -> c_int {
    // SAFETY: caller's contract.
    let b = unsafe { cstr(path) }.unwrap_or_default();
    if let Ok(s) = std::str::from_utf8(b) {
        if (s == KFD_PATH || s.starts_with("/dev/dri")) && fake_stat(s, st) {
            return 0;
        }
    }
    // SAFETY: caller's contract.
    match unsafe { route(path) } {
        Route::File(c) => next(c.as_ptr()),
        _ => next(path),
    }
}

/// `stat(2)`, routed.
///
/// # Safety
/// As `stat(2)`.
#[no_mangle]
pub unsafe extern "C" fn stat(path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: forwarding the caller's contract.
    unsafe { stat_common(path, st, |p| real!("stat", StatFn)(p, st)) }
}

/// `stat64(2)`, routed.
///
/// # Safety
/// As `stat(2)`.
#[no_mangle]
pub unsafe extern "C" fn stat64(path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: forwarding the caller's contract.
    unsafe { stat_common(path, st, |p| real!("stat64", StatFn)(p, st)) }
}

/// `lstat(2)`, routed.
///
/// # Safety
/// As `lstat(2)`.
#[no_mangle]
pub unsafe extern "C" fn lstat(path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: forwarding the caller's contract.
    unsafe { stat_common(path, st, |p| real!("lstat", StatFn)(p, st)) }
}

/// `lstat64(2)`, routed.
///
/// # Safety
/// As `lstat(2)`.
#[no_mangle]
pub unsafe extern "C" fn lstat64(path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: forwarding the caller's contract.
    unsafe { stat_common(path, st, |p| real!("lstat64", StatFn)(p, st)) }
}

/// `__xstat` (binaries built against glibc < 2.33), routed.
///
/// # Safety
/// As `stat(2)`.
#[no_mangle]
pub unsafe extern "C" fn __xstat(ver: c_int, path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: forwarding the caller's contract.
    unsafe { stat_common(path, st, |p| real!("__xstat", XstatFn)(ver, p, st)) }
}

/// `__xstat64`, routed.
///
/// # Safety
/// As `stat(2)`.
#[no_mangle]
pub unsafe extern "C" fn __xstat64(ver: c_int, path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: forwarding the caller's contract.
    unsafe { stat_common(path, st, |p| real!("__xstat64", XstatFn)(ver, p, st)) }
}

type AccessFn = unsafe extern "C" fn(*const c_char, c_int) -> c_int;

/// `access(2)`, routed.
///
/// # Safety
/// As `access(2)`.
#[no_mangle]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: the caller passes a C string.
    match unsafe { route(path) } {
        Route::Device(_) => 0,
        // SAFETY: forwarding with a valid C string.
        Route::File(c) => unsafe { real!("access", AccessFn)(c.as_ptr(), mode) },
        // SAFETY: forwarding the caller's arguments.
        Route::Pass => unsafe { real!("access", AccessFn)(path, mode) },
    }
}

type IoctlFn = unsafe extern "C" fn(c_int, c_ulong, *mut c_void) -> c_int;

/// `ioctl(2)`: device fds go to the emulator.
///
/// # Safety
/// As `ioctl(2)`.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int {
    let Some(efd) = emu_fd(fd) else {
        // SAFETY: forwarding the caller's arguments.
        return unsafe { real!("ioctl", IoctlFn)(fd, request, arg) };
    };
    let nr = request & 0xff;
    let ty = (request >> 8) & 0xff;
    // ACQUIRE_VM names the render fd by number: hand the emulator its own fd.
    let mut acquire = [0u32; 2];
    let mut arg = arg;
    if ty == 0x4b && nr == 0x15 && !arg.is_null() {
        // SAFETY: ACQUIRE_VM's argument is 8 bytes, per the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(arg.cast::<u32>(), acquire.as_mut_ptr(), 2) };
        match emu_fd(acquire[0] as c_int) {
            Some(r) => acquire[0] = r as u32,
            None => {
                set_errno(libc::EINVAL);
                return -1;
            }
        }
        arg = acquire.as_mut_ptr().cast();
    }
    // SAFETY: forwarded caller contract (argument memory as the ioctl requires).
    let r = unsafe { emu().ioctl(efd, request, arg) };
    if nr != 0x0c || r.is_err() {
        log!("ioctl({fd}, {ty:#x}/{nr:#x} size {}) = {r:?}", (request >> 16) & 0x3fff);
    }
    match r {
        Ok(v) => v,
        Err(Errno(e)) => {
            set_errno(e);
            -1
        }
    }
}

type MmapFn = unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, c_int, libc::off_t) -> *mut c_void;

/// # Safety
/// As `mmap(2)`.
unsafe fn mmap_common(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: libc::off_t,
    next: MmapFn,
) -> *mut c_void {
    let Some(efd) = emu_fd(fd) else {
        // SAFETY: forwarding the caller's arguments.
        return unsafe { next(addr, len, prot, flags, fd, off) };
    };
    // SAFETY: forwarded caller contract.
    let r = unsafe { emu().mmap(addr, len, prot, flags, efd, off as u64) };
    log!("mmap({addr:?}, {len:#x}, fd {fd}, off {off:#x}) = {r:?}");
    match r {
        Ok(p) => p,
        Err(Errno(e)) => {
            set_errno(e);
            libc::MAP_FAILED
        }
    }
}

/// `mmap(2)`: device fds map the emulator's memory.
///
/// # Safety
/// As `mmap(2)`.
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: libc::off_t,
) -> *mut c_void {
    // SAFETY: forwarding the caller's contract.
    unsafe { mmap_common(addr, len, prot, flags, fd, off, real!("mmap", MmapFn)) }
}

/// `mmap64(2)`.
///
/// # Safety
/// As `mmap(2)`.
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: libc::off_t,
) -> *mut c_void {
    // SAFETY: forwarding the caller's contract.
    unsafe { mmap_common(addr, len, prot, flags, fd, off, real!("mmap64", MmapFn)) }
}

type PopenFn = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut libc::FILE;

/// `popen(3)`: rocminfo's `lsmod | grep amdgpu` probe reads the routed `/proc/modules`.
///
/// # Safety
/// As `popen(3)`.
#[no_mangle]
pub unsafe extern "C" fn popen(command: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    // SAFETY: the caller passes a C string.
    let cmd = unsafe { cstr(command) }.map(|b| String::from_utf8_lossy(b).into_owned());
    if let (Some(cmd), Some(d)) = (cmd, dir()) {
        if cmd.trim_start().starts_with("lsmod") {
            let modules = d.base.join("modules");
            let new = cmd.replacen("lsmod", &format!("cat '{}'", modules.display()), 1);
            log!("popen({cmd}) -> {new}");
            if let Ok(c) = CString::new(new) {
                // SAFETY: forwarding with a valid C string.
                return unsafe { real!("popen", PopenFn)(c.as_ptr(), mode) };
            }
        }
    }
    // SAFETY: forwarding the caller's arguments.
    unsafe { real!("popen", PopenFn)(command, mode) }
}
