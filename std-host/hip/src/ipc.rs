//! Inter-process sharing: `hipIpcGetMemHandle`, `hipIpcOpenMemHandle`, `hipIpcCloseMemHandle`,
//! `hipIpcGetEventHandle`, `hipIpcOpenEventHandle` (docs/hip-semantics.md §6.6; the mechanism
//! is docs/kfd-aql.md §1.4, "Sharing between processes").
//!
//! **Memory.** The exporter's allocation becomes a dma-buf (`AnyBackend::ipc_export`: an open
//! fd kept until the allocation is freed). The 64-byte handle keeps clr's outer layout
//! (`psize` at 32, `poffset` at 40, the owner's pid at 48) and carries in its first 32 bytes
//! what the importer needs to take that fd: the fd number, and the identity of the file behind
//! it (inode, device and file position), so that a handle whose fd was closed and whose number
//! now names another file is refused. The importer takes the fd with `pidfd_open` +
//! `pidfd_getfd` (the exporter allows it under Yama with `prctl(PR_SET_PTRACER)`), imports it on
//! its current device at a VA of its own (`AnyBackend::ipc_import`), and answers the VA plus
//! the handle's offset. Opening one handle again gives the same pointer and a reference more;
//! `hipIpcCloseMemHandle` waits for the device and drops one, the last unmapping the memory.
//!
//! **Events.** An event created with `hipEventInterprocess | hipEventDisableTiming` gets, with
//! its handle, a shared page (a memfd, handed over as the buffer's fd is): a record count and
//! 64 completion slots, registered as device memory in each process that holds it. Every
//! `hipEventRecord` of such an event, in either process, takes the next sequence number and
//! has its stream write it into its slot once the record completes; `hipEventQuery`,
//! `hipEventSynchronize` and `hipStreamWaitEvent` of it look at the slot of the latest record
//! (the stream wait as a device-side wait on the slot), so the importer observes the
//! exporter's latest record completing, as clr's IPC events do through their shared segment.

use std::collections::{HashMap, HashSet};
use std::ffi::{c_uint, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use aqueduct::{Backend, EventHandle, StreamHandle};

use crate::error::{
    api, Hip, HipResult, INVALID_CONFIGURATION, INVALID_CONTEXT, INVALID_DEVICE_POINTER, INVALID_VALUE, NOT_READY,
    NOT_SUPPORTED,
};
use crate::global::{global, lock, Global};
use crate::ipc_opened::OpenedRange;
use crate::memory::allocation_of;
use crate::Handle;

/// `hipIpcMemHandle_t` / `hipIpcEventHandle_t`: 64 opaque bytes, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IpcHandle {
    /// `reserved`.
    pub reserved: [u8; 64],
}

/// `hipIpcMemLazyEnablePeerAccess` (0 in HIP 5.2's header, 1 in CUDA's and newer HIP's).
const LAZY_ENABLE_PEER_ACCESS: c_uint = 0x1;
/// `hipEventInterprocess`.
const EVENT_INTERPROCESS: c_uint = 0x4;

/// `b"AQIM"`: the first word of a memory handle.
const MEM_MAGIC: u32 = u32::from_le_bytes(*b"AQIM");
/// `b"AQIE"`: the first word of an event handle.
const EVENT_MAGIC: u32 = u32::from_le_bytes(*b"AQIE");
/// `b"AQDIPCEV"`: the first word of an event's shared page.
const PAGE_MAGIC: u64 = u64::from_le_bytes(*b"AQDIPCEV");

/// `PR_SET_PTRACER` and `PR_SET_PTRACER_ANY` (`linux/prctl.h`).
const PR_SET_PTRACER: libc::c_int = 0x5961_6d61;
const PR_SET_PTRACER_ANY: libc::c_ulong = !0;

/// Where a handle's fd is and which file it must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FdRef {
    pid: u32,
    fd: i32,
    ino: u64,
    dev: u64,
    pos: u64,
}

impl FdRef {
    /// The identity of this process's `fd`.
    fn of(fd: i32) -> HipResult<FdRef> {
        let (ino, dev) = identity(fd).ok_or(INVALID_VALUE)?;
        // SAFETY: reading the position of an open fd.
        let pos = unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) }.max(0) as u64;
        Ok(FdRef { pid: std::process::id(), fd, ino, dev, pos })
    }

    /// Bytes 0..32 of a handle (after the magic word).
    fn write(&self, magic: u32, b: &mut [u8; 64]) {
        b[0..4].copy_from_slice(&magic.to_le_bytes());
        b[4..8].copy_from_slice(&self.fd.to_le_bytes());
        b[8..16].copy_from_slice(&self.ino.to_le_bytes());
        b[16..24].copy_from_slice(&self.dev.to_le_bytes());
        b[24..32].copy_from_slice(&self.pos.to_le_bytes());
        b[48..52].copy_from_slice(&self.pid.to_le_bytes());
    }

    fn read(magic: u32, b: &[u8; 64]) -> Option<FdRef> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from(u32_at(i)) | u64::from(u32_at(i + 4)) << 32;
        (u32_at(0) == magic).then(|| FdRef {
            pid: u32_at(48),
            fd: u32_at(4) as i32,
            ino: u64_at(8),
            dev: u64_at(16),
            pos: u64_at(24),
        })
    }

    /// A new fd of this process for the exporter's file: `pidfd_open` + `pidfd_getfd`, then
    /// the file's identity checked. `None` when the process or the fd is gone, or the number
    /// now names another file.
    fn take(&self) -> Option<Fd> {
        // SAFETY: plain syscalls on integers.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, self.pid as libc::pid_t, 0) } as i32;
        if pidfd < 0 {
            return None;
        }
        // SAFETY: as above; the pidfd is closed right after.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, self.fd, 0) } as i32;
        // SAFETY: closing the pidfd opened above.
        unsafe { libc::close(pidfd) };
        if fd < 0 {
            return None;
        }
        let fd = Fd(fd);
        // SAFETY: reading the position of the fd just taken.
        let pos = unsafe { libc::lseek(fd.0, 0, libc::SEEK_CUR) }.max(0) as u64;
        (identity(fd.0) == Some((self.ino, self.dev)) && pos == self.pos).then_some(fd)
    }
}

/// An fd this module opened, closed when dropped.
struct Fd(i32);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: closing an fd this module owns.
        unsafe { libc::close(self.0) };
    }
}

/// The inode and device of the file behind `fd`.
fn identity(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: fstat into a struct we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_ino, st.st_dev))
}

/// Lets any process of ours take our fds under Yama's `ptrace_scope` 1 (without Yama the call
/// fails and nothing is needed).
fn allow_fd_takers() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        // SAFETY: a prctl with integer arguments.
        unsafe { libc::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) };
    });
}

/// A handle opened here (`hipIpcOpenMemHandle`); its range, device and buffer id are
/// [`crate::ipc_opened`]'s.
#[derive(Debug, Clone, Copy)]
struct Opened {
    key: FdRef,
    refs: u32,
}

/// Imports by VA.
static OPENED: LazyLock<Mutex<HashMap<u64, Opened>>> = LazyLock::new(Default::default);

/// `hipIpcGetMemHandle`: `ptr` must lie in device memory allocated here (`hipErrorInvalidValue`
/// otherwise); the handle names the whole allocation and `ptr`'s offset in it.
///
/// # Safety
/// `handle` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipIpcGetMemHandle(handle: *mut IpcHandle, ptr: *mut c_void) -> i32 {
    api(|| {
        let g = global()?;
        if handle.is_null() || ptr.is_null() {
            return Err(INVALID_VALUE);
        }
        let addr = ptr as usize as u64;
        let a = allocation_of(g, addr).ok_or(INVALID_VALUE)?;
        if a.host_flags.is_some() || a.managed || a.registered.is_some() {
            return Err(INVALID_VALUE);
        }
        let e = g.rt.backend().ipc_export(a.base).map_err(|e| not_supported_or(e, INVALID_VALUE))?;
        allow_fd_takers();
        let mut b = [0u8; 64];
        FdRef::of(e.fd)?.write(MEM_MAGIC, &mut b);
        b[32..40].copy_from_slice(&a.bytes.to_le_bytes());
        b[40..48].copy_from_slice(&(addr - a.base).to_le_bytes());
        // SAFETY: non-null, valid for writes by the caller's contract.
        unsafe { handle.write(IpcHandle { reserved: b }) };
        Ok(())
    })
}

/// `hipIpcOpenMemHandle`: flags 0 or `hipIpcMemLazyEnablePeerAccess`; a handle with no size is
/// `hipErrorInvalidValue`, one of this process `hipErrorInvalidContext` (as clr), one whose
/// memory cannot be reached `hipErrorInvalidDevicePointer`.
///
/// # Safety
/// `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipIpcOpenMemHandle(ptr: *mut *mut c_void, handle: IpcHandle, flags: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        if ptr.is_null() || flags & !LAZY_ENABLE_PEER_ACCESS != 0 {
            return Err(INVALID_VALUE);
        }
        let b = &handle.reserved;
        let bytes = u64::from_le_bytes(b[32..40].try_into().unwrap_or_default());
        let offset = u64::from_le_bytes(b[40..48].try_into().unwrap_or_default());
        if bytes == 0 {
            return Err(INVALID_VALUE);
        }
        let owner = u32::from_le_bytes(b[48..52].try_into().unwrap_or_default());
        if owner == std::process::id() {
            return Err(INVALID_CONTEXT);
        }
        let key = FdRef::read(MEM_MAGIC, b).ok_or(INVALID_DEVICE_POINTER)?;
        if offset >= bytes {
            return Err(INVALID_DEVICE_POINTER);
        }
        let va = open_memory(g, key, bytes)?;
        // SAFETY: non-null, valid for writes by the caller's contract.
        unsafe { ptr.write((va + offset) as usize as *mut c_void) };
        Ok(())
    })
}

/// The VA of the import of `key` (at least `bytes` long), opened now or a reference more.
fn open_memory(g: &Global, key: FdRef, bytes: u64) -> HipResult<u64> {
    let mut opened = lock(&OPENED);
    if let Some((&va, o)) = opened.iter_mut().find(|(_, o)| o.key == key) {
        o.refs += 1;
        return Ok(va);
    }
    let fd = key.take().ok_or(INVALID_DEVICE_POINTER)?;
    let device = g.rt.device()?;
    let (va, size) =
        g.rt.backend().ipc_import(device, fd.0).map_err(|e| not_supported_or(e, INVALID_DEVICE_POINTER))?;
    if size < bytes {
        let _ = g.rt.backend().ipc_close(va);
        return Err(INVALID_DEVICE_POINTER);
    }
    let buffer_id = crate::global::next_buffer_id();
    opened.insert(va, Opened { key, refs: 1 });
    crate::ipc_opened::register(OpenedRange { va, bytes, device, buffer_id });
    Ok(va)
}

/// `hipIpcCloseMemHandle`: `ptr` as `hipIpcOpenMemHandle` gave it (`hipErrorInvalidValue`
/// otherwise); the device finishes its work first, and the last reference unmaps the memory.
#[no_mangle]
pub extern "C" fn hipIpcCloseMemHandle(ptr: *mut c_void) -> i32 {
    api(|| {
        let g = global()?;
        if ptr.is_null() {
            return Err(INVALID_VALUE);
        }
        let o = crate::ipc_opened::holding(ptr as usize as u64).ok_or(INVALID_VALUE)?;
        g.wait_idle_on(o.device)?;
        let mut opened = lock(&OPENED);
        let Some(e) = opened.get_mut(&o.va) else { return Err(INVALID_VALUE) };
        e.refs -= 1;
        if e.refs > 0 {
            return Ok(());
        }
        opened.remove(&o.va);
        drop(opened);
        crate::ipc_opened::unregister(o.va);
        Ok(g.rt.backend().ipc_close(o.va)?)
    })
}

/// The shared page of an IPC event: records issued, and the slot each writes on completion.
#[repr(C)]
struct EventPage {
    magic: u64,
    /// Records issued so far (the latest record's sequence number).
    issued: AtomicU64,
    /// Slot `n % SLOTS` holds `n` once record `n` completed.
    slots: [AtomicU64; SLOTS],
}

/// Completion slots of an IPC event (a record waits for its slot's previous record first).
const SLOTS: usize = 64;
/// Bytes of the shared page.
const PAGE: usize = 4096;
const _: () = assert!(size_of::<EventPage>() <= PAGE);

/// The IPC side of an event in this process.
struct IpcEvent {
    /// This process's mapping of the shared page.
    page: *mut EventPage,
    /// Its device address (the page registered as host memory).
    device_address: u64,
    /// The memfd, kept open for other processes to take (an opened event may be shared on).
    fd: Fd,
}

// SAFETY: the page is shared memory touched only through atomics; the fd is an integer.
unsafe impl Send for IpcEvent {}

impl IpcEvent {
    fn page(&self) -> &EventPage {
        // SAFETY: the mapping lives as long as this entry (it is unmapped only when the entry
        // is dropped), and the page is only touched through atomics.
        unsafe { &*self.page }
    }

    /// The slot of record `n` and its device address.
    fn slot(&self, n: u64) -> (&AtomicU64, u64) {
        let i = (n % SLOTS as u64) as usize;
        let offset = std::mem::offset_of!(EventPage, slots) + i * 8;
        (&self.page().slots[i], self.device_address + offset as u64)
    }

    /// `Some(n)` while record `n`, the latest, has not completed.
    fn pending(&self) -> Option<u64> {
        // Ordering: Acquire pairs with the device's write of the slot and the other process's
        // increment, so that what the record covers is visible once it reads complete.
        let n = self.page().issued.load(Ordering::Acquire);
        (n != 0 && self.slot(n).0.load(Ordering::Acquire) < n).then_some(n)
    }
}

/// Events created with `hipEventInterprocess`.
static INTERPROCESS: LazyLock<Mutex<HashSet<u64>>> = LazyLock::new(Default::default);
/// Whether any event was ever created with `hipEventInterprocess`: until then the event hooks
/// below return at once, keeping the record, query and wait paths as they are.
static ANY_INTERPROCESS: AtomicBool = AtomicBool::new(false);

/// Whether no interprocess event exists yet (the hooks' fast path).
fn none_interprocess() -> bool {
    // Ordering: Relaxed; set before the first interprocess event's handle is handed out, by
    // the thread that then passes the handle on, which orders it for the user's other threads.
    !ANY_INTERPROCESS.load(Ordering::Relaxed)
}
/// Events with a shared page, exported or opened here.
static EVENTS: LazyLock<Mutex<HashMap<u64, IpcEvent>>> = LazyLock::new(Default::default);

/// Notes an event `hipEventCreateWithFlags` made with `flags`.
pub(crate) fn event_created(event: EventHandle, flags: c_uint) {
    if flags & EVENT_INTERPROCESS != 0 {
        // Ordering: Relaxed; see `none_interprocess`.
        ANY_INTERPROCESS.store(true, Ordering::Relaxed);
        lock(&INTERPROCESS).insert(event.0);
    }
}

/// Forgets a destroyed event. Its shared page stays registered if a record of it has not
/// completed (the device still writes there).
pub(crate) fn event_destroyed(g: &Global, event: EventHandle) {
    if none_interprocess() {
        return;
    }
    lock(&INTERPROCESS).remove(&event.0);
    let Some(e) = lock(&EVENTS).remove(&event.0) else { return };
    if e.pending().is_some() {
        std::mem::forget(e);
        return;
    }
    let _ = g.rt.backend().host_unregister(e.device_address);
    // SAFETY: unmapping this entry's mapping of the page, used by nothing else now.
    unsafe { libc::munmap(e.page.cast(), PAGE) };
}

/// After `hipEventRecord` of `event` on `s`: for an interprocess event, the next record number
/// on its shared page, written into its slot by the stream once the record completes. A capturing stream
/// records into its graph only.
pub(crate) fn event_recorded(g: &Global, event: EventHandle, s: StreamHandle) -> HipResult {
    if none_interprocess() {
        return Ok(());
    }
    if lock(&INTERPROCESS).contains(&event.0) {
        // The page exists from the first record on, so that a handle made later names it.
        event_page(g, event.0)?;
    }
    let (n, (slot, address)) = {
        let events = lock(&EVENTS);
        let Some(e) = events.get(&event.0) else { return Ok(()) };
        if !matches!(g.rt.stream_is_capturing(s), Ok(aqueduct::CaptureStatus::None)) {
            return Ok(());
        }
        // Ordering: AcqRel; a sequence both processes take numbers from.
        let n = e.page().issued.fetch_add(1, Ordering::AcqRel) + 1;
        let (slot, address) = e.slot(n);
        (n, (slot as *const AtomicU64 as usize, address))
    };
    // The slot's previous record must have completed before this one reuses it.
    // SAFETY: the page stays mapped while its event lives, and a record holds the event.
    let slot = unsafe { &*(slot as *const AtomicU64) };
    // Ordering: Acquire; see `IpcEvent::pending`.
    while n > SLOTS as u64 && slot.load(Ordering::Acquire) < n - SLOTS as u64 {
        std::thread::yield_now();
    }
    Ok(g.rt.write_value64(s, address, n, 0)?)
}

/// `hipEventQuery` of an event with a shared page: `Some(NotReady)` while its latest record
/// (in either process) has not completed; `None` for another event.
pub(crate) fn event_query(event: EventHandle) -> Option<HipResult> {
    if none_interprocess() {
        return None;
    }
    let events = lock(&EVENTS);
    let e = events.get(&event.0)?;
    Some(match e.pending() {
        Some(_) => Err(Hip(NOT_READY)),
        None => Ok(()),
    })
}

/// `hipEventSynchronize` of an event with a shared page: waits for its latest record as of
/// now (nothing for another event).
pub(crate) fn event_synchronize(event: EventHandle) {
    if none_interprocess() {
        return;
    }
    let target = {
        let events = lock(&EVENTS);
        let Some(e) = events.get(&event.0) else { return };
        e.pending().map(|n| (e.slot(n).0 as *const AtomicU64 as usize, n))
    };
    if let Some((slot, n)) = target {
        // SAFETY: the page stays mapped while the event lives; the caller holds it.
        let slot = unsafe { &*(slot as *const AtomicU64) };
        let mut spins = 0u32;
        // Ordering: Acquire; see `IpcEvent::pending`.
        while slot.load(Ordering::Acquire) < n {
            spins = spins.saturating_add(1);
            if spins < 1000 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }
}

/// `hipStreamWaitEvent` of an event with a shared page: later work of `s` waits on the device
/// for the slot of the latest record as of now; `None` for another event, and for a capturing
/// stream (its graph depends on the event as core records it).
pub(crate) fn stream_wait_event(g: &Global, s: StreamHandle, event: EventHandle) -> Option<HipResult> {
    if none_interprocess() || !matches!(g.rt.stream_is_capturing(s), Ok(aqueduct::CaptureStatus::None)) {
        return None;
    }
    let target = {
        let events = lock(&EVENTS);
        let e = events.get(&event.0)?;
        e.pending().map(|n| (e.slot(n).1, n))
    };
    Some(match target {
        // `hipStreamWaitValueGte` (0), all bits.
        Some((address, n)) => g.rt.wait_value64(s, address, n, 0, u64::MAX).map_err(Into::into),
        None => Ok(()),
    })
}

/// Maps the event page of `fd` and registers it as device memory of the current device.
fn map_event_page(g: &Global, fd: Fd) -> HipResult<IpcEvent> {
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: a new shared mapping at an address of the kernel's choice.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), PAGE, rw, libc::MAP_SHARED, fd.0, 0) };
    if p == libc::MAP_FAILED {
        return Err(INVALID_VALUE);
    }
    let page = p.cast::<EventPage>();
    // SAFETY: the page just mapped; the magic is read atomically as the other fields are.
    let magic = unsafe { (*page.cast::<AtomicU64>()).load(Ordering::Acquire) };
    let device = g.rt.device()?;
    let registered = (magic == PAGE_MAGIC).then(|| g.rt.backend().host_register(device, p as usize as u64, PAGE));
    match registered {
        Some(Ok(device_address)) => Ok(IpcEvent { page, device_address, fd }),
        _ => {
            // SAFETY: unmapping the mapping made above.
            unsafe { libc::munmap(p, PAGE) };
            Err(INVALID_VALUE)
        }
    }
}

/// A backend without IPC (ROCr) answers `NotSupported`; any other failure is `other`.
fn not_supported_or(e: aqueduct::Error, other: Hip) -> Hip {
    if e == aqueduct::Error::NotSupported {
        NOT_SUPPORTED
    } else {
        other
    }
}

/// The event `event` names, checked (a destroyed or garbage handle answers core's error).
fn check_event(g: &Global, event: Handle) -> HipResult {
    match g.rt.event_query(EventHandle(event as usize as u64)) {
        Err(e) if Hip::from(e) != Hip(NOT_READY) => Err(e.into()),
        _ => Ok(()),
    }
}

/// `hipIpcGetEventHandle`: a live event created with `hipEventInterprocess` (another is
/// `hipErrorInvalidConfiguration`, as clr answers); its shared page is made on the first call.
///
/// # Safety
/// `handle` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipIpcGetEventHandle(handle: *mut IpcHandle, event: Handle) -> i32 {
    api(|| {
        let g = global()?;
        if handle.is_null() || event.is_null() {
            return Err(INVALID_VALUE);
        }
        check_event(g, event)?;
        let id = event as usize as u64;
        if !lock(&INTERPROCESS).contains(&id) {
            return Err(INVALID_CONFIGURATION);
        }
        let fd = event_page(g, id)?;
        allow_fd_takers();
        let mut b = [0u8; 64];
        FdRef::of(fd)?.write(EVENT_MAGIC, &mut b);
        // SAFETY: non-null, valid for writes by the caller's contract.
        unsafe { handle.write(IpcHandle { reserved: b }) };
        Ok(())
    })
}

/// The memfd of interprocess event `id`'s shared page, made now if it has none.
fn event_page(g: &Global, id: u64) -> HipResult<i32> {
    let mut events = lock(&EVENTS);
    if let Some(e) = events.get(&id) {
        return Ok(e.fd.0);
    }
    let e = new_event_page(g)?;
    let fd = e.fd.0;
    events.insert(id, e);
    Ok(fd)
}

/// A fresh shared event page: a memfd, mapped and registered here, its fd kept for importers.
fn new_event_page(g: &Global) -> HipResult<IpcEvent> {
    // SAFETY: memfd_create with a NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"aqueduct-ipc-event".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(crate::error::OUT_OF_MEMORY);
    }
    let fd = Fd(fd);
    // SAFETY: sizing our own memfd.
    if unsafe { libc::ftruncate(fd.0, PAGE as libc::off_t) } != 0 {
        return Err(crate::error::OUT_OF_MEMORY);
    }
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: a new shared mapping of our memfd.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), PAGE, rw, libc::MAP_SHARED, fd.0, 0) };
    if p == libc::MAP_FAILED {
        return Err(crate::error::OUT_OF_MEMORY);
    }
    // SAFETY: the fresh page (zero: no record issued, no slot written); the magic last.
    unsafe { (*p.cast::<AtomicU64>()).store(PAGE_MAGIC, Ordering::Release) };
    let device = g.rt.device()?;
    match g.rt.backend().host_register(device, p as usize as u64, PAGE) {
        Ok(device_address) => Ok(IpcEvent { page: p.cast(), device_address, fd }),
        Err(e) => {
            // SAFETY: unmapping the mapping made above.
            unsafe { libc::munmap(p, PAGE) };
            Err(e.into())
        }
    }
}

/// `hipIpcOpenEventHandle`: a new event (`hipEventInterprocess | hipEventDisableTiming`) over
/// the exporter's shared page; a handle of this process is `hipErrorInvalidContext`, one whose
/// page cannot be reached `hipErrorInvalidValue` (as clr).
///
/// # Safety
/// `event` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipIpcOpenEventHandle(event: *mut Handle, handle: IpcHandle) -> i32 {
    api(|| {
        let g = global()?;
        if event.is_null() {
            return Err(INVALID_VALUE);
        }
        let key = FdRef::read(EVENT_MAGIC, &handle.reserved).ok_or(INVALID_VALUE)?;
        if key.pid == std::process::id() {
            return Err(INVALID_CONTEXT);
        }
        let ipc = map_event_page(g, key.take().ok_or(INVALID_VALUE)?)?;
        let flags = EVENT_INTERPROCESS | 0x2;
        let e = match g.rt.event_create(flags) {
            Ok(e) => e,
            Err(err) => {
                let _ = g.rt.backend().host_unregister(ipc.device_address);
                // SAFETY: unmapping the page `map_event_page` mapped.
                unsafe { libc::munmap(ipc.page.cast(), PAGE) };
                return Err(err.into());
            }
        };
        event_created(e, flags);
        lock(&EVENTS).insert(e.0, ipc);
        // SAFETY: non-null, valid for writes by the caller's contract.
        unsafe { event.write(e.0 as usize as Handle) };
        Ok(())
    })
}
