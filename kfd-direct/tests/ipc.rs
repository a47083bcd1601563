//! Sharing device memory between processes on the emulated GPU (docs/kfd-aql.md §1.4, "Sharing
//! between processes"): an allocation exported by one backend is a real dma-buf fd; another
//! backend — over a machine of its own, as a second process's emulated GPU is — takes the fd
//! with `pidfd_getfd`, imports it at a VA of its own, and both see one set of pages through
//! their devices' copies and fills; the pages outlive the exporter's free.

use aqueduct::{Error, Runtime, SingleThread};
use aqueduct_kfd::{EmuSys, Kfd, KfdConfig};

type Rt = Runtime<Kfd<EmuSys>, SingleThread>;

fn runtime() -> Rt {
    Runtime::new(Kfd::open(EmuSys::with_defaults().unwrap(), KfdConfig::default()).unwrap(), SingleThread)
}

/// Host memory of a runtime, `len` bytes at `at`.
fn host(at: u64, len: usize) -> &'static mut [u8] {
    // SAFETY: `at` is a host allocation of a runtime of at least `len` bytes that the test
    // reads and writes only between completed copies.
    unsafe { std::slice::from_raw_parts_mut(at as usize as *mut u8, len) }
}

/// A new fd of this process for its own fd `fd`, taken the way an importing process takes the
/// exporter's (`pidfd_open` + `pidfd_getfd`).
fn getfd(fd: i32) -> i32 {
    // SAFETY: plain syscalls on integers; the pidfd is closed below.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) as i32;
        assert!(pidfd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
        let got = libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) as i32;
        assert!(got >= 0, "pidfd_getfd: {}", std::io::Error::last_os_error());
        libc::close(pidfd);
        got
    }
}

/// Reads `len` bytes at device address `at` of `rt` through its device's copy.
fn read(rt: &Rt, at: u64, len: usize) -> Vec<u8> {
    let s = rt.stream_create(0).unwrap();
    let h = rt.host_malloc(len).unwrap();
    rt.memcpy_async(s, h, at, len as u64).unwrap();
    rt.stream_synchronize(s).unwrap();
    let v = host(h, len).to_vec();
    rt.free(h).unwrap();
    rt.stream_destroy(s).unwrap();
    v
}

#[test]
fn an_import_in_another_machine_shares_the_exporters_pages() {
    let (a, b) = (runtime(), runtime());
    let size = 3 << 20;
    let buf = a.malloc(size).unwrap();
    let s = a.stream_create(0).unwrap();
    a.memset_async(s, buf, 0x11, 1, size as u64).unwrap();
    a.memset_async(s, buf + 4096, 0x0403_0201, 4, 64).unwrap();
    a.stream_synchronize(s).unwrap();

    assert_eq!(a.backend().ipc_export(buf + 4096), Err(Error::InvalidValue), "an allocation's start only");
    let e = a.backend().ipc_export(buf).unwrap();
    assert_eq!((e.base, e.size), (buf, size as u64));
    assert_eq!(a.backend().ipc_export(buf).unwrap(), e, "one fd per allocation");

    // The dma-buf is a real fd.
    // SAFETY: fstat into a struct we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::fstat(e.fd, &mut st) }, 0);

    let fd = getfd(e.fd);
    let (va, bytes) = b.backend().ipc_import(0, fd).unwrap();
    // SAFETY: closing our own fd: the import holds the pages without it.
    unsafe { libc::close(fd) };
    assert_eq!(bytes, size as u64);
    assert_ne!(va, 0);

    let got = read(&b, va, 8192);
    assert!(got[..4096].iter().all(|&x| x == 0x11), "the exporter's fill");
    assert_eq!(&got[4096..4104], &[1, 2, 3, 4, 1, 2, 3, 4]);
    assert!(got[4096 + 256..].iter().all(|&x| x == 0x11));

    // The importer writes with its device; the exporter's device sees it.
    let t = b.stream_create(0).unwrap();
    b.memset_async(t, va + (2 << 20), 0x77, 1, 100).unwrap();
    b.stream_synchronize(t).unwrap();
    let got = read(&a, buf + (2 << 20) - 4, 108);
    assert_eq!(&got[..4], &[0x11; 4]);
    assert!(got[4..104].iter().all(|&x| x == 0x77));
    assert_eq!(&got[104..], &[0x11; 4]);

    // The exporter frees its allocation (closing the dma-buf): the import keeps the pages.
    a.free(buf).unwrap();
    // SAFETY: fstat of a closed fd number.
    assert_ne!(unsafe { libc::fstat(e.fd, &mut st) }, 0, "freeing the allocation closed its dma-buf");
    let got = read(&b, va + (2 << 20), 128);
    assert!(got[..100].iter().all(|&x| x == 0x77) && got[100..].iter().all(|&x| x == 0x11));

    b.backend().ipc_close(va).unwrap();
    assert_eq!(b.backend().ipc_close(va), Err(Error::InvalidValue));
}

#[test]
fn imports_refuse_what_is_not_a_live_dma_buf() {
    let (a, b) = (runtime(), runtime());
    // A closed fd, and a file that is not a dma-buf.
    assert_eq!(b.backend().ipc_import(0, 9999), Err(Error::InvalidValue));
    // SAFETY: a fresh memfd of our own.
    let memfd = unsafe { libc::memfd_create(c"not-a-dmabuf".as_ptr(), 0) };
    // SAFETY: sizing our own memfd.
    assert_eq!(unsafe { libc::ftruncate(memfd, 1 << 20) }, 0);
    assert_eq!(b.backend().ipc_import(0, memfd), Err(Error::InvalidValue));
    // SAFETY: closing our own fd.
    unsafe { libc::close(memfd) };
    assert_eq!(b.backend().ipc_import(7, 0), Err(Error::InvalidDevice));
    assert_eq!(b.backend().ipc_close(0x1000), Err(Error::InvalidValue));

    // Memory that is not an allocation of the backend.
    assert_eq!(a.backend().ipc_export(0x1000), Err(Error::InvalidValue));

    // Once the exporter freed the allocation and the importer closed its import, a new fd the
    // importer kept of the dma-buf finds no pages any more.
    let buf = a.malloc(1 << 20).unwrap();
    let e = a.backend().ipc_export(buf).unwrap();
    let kept = getfd(e.fd);
    let fd = getfd(e.fd);
    let (va, _) = b.backend().ipc_import(0, fd).unwrap();
    a.free(buf).unwrap();
    b.backend().ipc_close(va).unwrap();
    assert_eq!(b.backend().ipc_import(0, kept), Err(Error::InvalidValue));
    // SAFETY: closing our own fds.
    unsafe {
        libc::close(fd);
        libc::close(kept);
    }
}
