//! Stream management parameters and exact HIP error codes (docs/hip-semantics.md §2.2): creation
//! flags, priority clamping, getters on `0` / `hipStreamLegacy` / `hipStreamPerThread`, CU masks
//! and destroy of the special handles.

use aqueduct::loopback::LOOPBACK_CUS;
use aqueduct::{CuMask, Error, StreamHandle};
use aqueduct_tests::*;

const NULL: StreamHandle = StreamHandle::NULL;
const LEGACY: StreamHandle = StreamHandle::LEGACY;
const PT: StreamHandle = StreamHandle::PER_THREAD;

#[test]
fn error_values_are_hips() {
    assert_eq!(Error::InvalidValue.code(), 1);
    assert_eq!(Error::OutOfMemory.code(), 2);
    assert_eq!(Error::InvalidDevice.code(), 101);
    assert_eq!(Error::InvalidHandle.code(), 400);
    assert_eq!(Error::NotReady.code(), 600);
    assert_eq!(Error::ContextIsDestroyed.code(), 709);
    assert_eq!(Error::LaunchFailure.code(), 719);
    assert_eq!(Error::StreamDetached.code(), 916);
    assert_eq!(StreamHandle::LEGACY.0, 1);
    assert_eq!(StreamHandle::PER_THREAD.0, 2);
}

#[test]
fn creation_flags() {
    let rt = runtime();
    let blocking = rt.stream_create(0).unwrap();
    let nb = rt.stream_create(1).unwrap();
    assert_eq!(rt.stream_flags(blocking), Ok(0));
    assert_eq!(rt.stream_flags(nb), Ok(1));
    for bad in [2u32, 3, 4, 0x8000_0000, u32::MAX] {
        assert_eq!(rt.stream_create(bad), Err(Error::InvalidValue), "flags {bad:#x}");
        assert_eq!(rt.stream_create_with_priority(bad, 0), Err(Error::InvalidValue), "flags {bad:#x}");
        assert_eq!(rt.stream_create_with_priority(bad, i32::MIN), Err(Error::InvalidValue), "flags {bad:#x}");
    }
    rt.stream_destroy(blocking).unwrap();
    rt.stream_destroy(nb).unwrap();
}

#[test]
fn priorities_clamp_never_error() {
    let rt = runtime();
    assert_eq!(rt.stream_priority_range(), (1, -1));
    let cases = [(i32::MIN, -1), (-1000, -1), (-2, -1), (-1, -1), (0, 0), (1, 1), (2, 1), (77, 1), (i32::MAX, 1)];
    for (p, want) in cases {
        for flags in [0, 1] {
            let s = rt.stream_create_with_priority(flags, p).unwrap();
            assert_eq!(rt.stream_priority(s), Ok(want), "priority {p}");
            assert_eq!(rt.stream_flags(s), Ok(flags));
            // The queue got the clamped priority too.
            let q = queue_of(&rt, s);
            assert_eq!(rt.backend().queue_priority(&aqueduct::loopback::LoopbackQueue(q)).value(), want);
            rt.stream_destroy(s).unwrap();
        }
    }
    // Every other way of making a stream reports Normal.
    let s = rt.stream_create(0).unwrap();
    assert_eq!(rt.stream_priority(s), Ok(0));
    let c = rt.stream_create_with_cu_mask(&[0xff]).unwrap();
    assert_eq!(rt.stream_priority(c), Ok(0));
    assert_eq!(rt.stream_flags(c), Ok(0));
}

#[test]
fn getters_on_special_handles() {
    let rt = runtime();
    // GetFlags: 0 → InvalidValue (HIP≠CUDA); L mirrors 0; PT → 0.
    assert_eq!(rt.stream_flags(NULL), Err(Error::InvalidValue));
    assert_eq!(rt.stream_flags(LEGACY), Err(Error::InvalidValue));
    assert_eq!(rt.stream_flags(PT), Ok(0));
    // GetPriority: 0 for all three.
    assert_eq!(rt.stream_priority(NULL), Ok(0));
    assert_eq!(rt.stream_priority(LEGACY), Ok(0));
    assert_eq!(rt.stream_priority(PT), Ok(0));
    // GetDevice: the current device.
    assert_eq!(rt.stream_device(NULL), Ok(0));
    assert_eq!(rt.stream_device(LEGACY), Ok(0));
    assert_eq!(rt.stream_device(PT), Ok(0));
    // GetId: 0 and L are the same stream; PT a different, non-zero one.
    let id0 = rt.stream_id(NULL).unwrap();
    assert_eq!(rt.stream_id(LEGACY), Ok(id0));
    let idpt = rt.stream_id(PT).unwrap();
    assert_ne!(idpt, 0);
    assert_ne!(idpt, id0);
    assert_eq!(rt.stream_id(PT), Ok(idpt), "the per-thread stream is resolved once");
    let s = rt.stream_create(0).unwrap();
    let ids = rt.stream_id(s).unwrap();
    assert!(ids != id0 && ids != idpt && ids != 0);
}

#[test]
fn destroy_special_handles() {
    let rt = runtime();
    for h in [NULL, LEGACY, PT] {
        assert_eq!(rt.stream_destroy(h), Err(Error::InvalidHandle), "{h:?}");
    }
    // Even once the null and per-thread streams exist.
    rt.marker(NULL).unwrap();
    rt.marker(PT).unwrap();
    for h in [NULL, LEGACY, PT] {
        assert_eq!(rt.stream_destroy(h), Err(Error::InvalidHandle), "{h:?}");
    }
    // And they still work afterwards.
    rt.stream_synchronize(NULL).unwrap();
    rt.stream_synchronize(PT).unwrap();
}

#[test]
fn cu_mask_round_trip() {
    let rt = runtime();
    let words = CuMask::words_for(LOOPBACK_CUS);
    assert_eq!(words, 4);
    let s = rt.stream_create_with_cu_mask(&[0x0000_00f0, 0x1, 0, 0x1]).unwrap();
    assert_eq!(rt.stream_flags(s), Ok(0));
    let mut out = [0xdead_beefu32; 6];
    rt.stream_cu_mask(s, &mut out).unwrap();
    assert_eq!(out, [0xf0, 0x1, 0, 0x1, 0, 0], "dwords past the mask are zeroed");
    // Exactly ceil(CUs/32) dwords is enough.
    let mut exact = [0u32; 4];
    rt.stream_cu_mask(s, &mut exact).unwrap();
    assert_eq!(exact, [0xf0, 0x1, 0, 0x1]);
    // The queue was created with the mask.
    let q = aqueduct::loopback::LoopbackQueue(queue_of(&rt, s));
    let qm = rt.backend().queue_cu_mask(&q).expect("queue has a mask");
    assert_eq!(qm.count(), 6);
    // The stream works.
    let k = register(rt.backend());
    let c = cell32(0);
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!(read32(addr32(c)), 1);
}

#[test]
fn cu_mask_errors() {
    let rt = runtime();
    // Empty mask.
    assert_eq!(rt.stream_create_with_cu_mask(&[]), Err(Error::InvalidValue));
    // A mask enabling no CU at all.
    assert_eq!(rt.stream_create_with_cu_mask(&[0, 0, 0, 0]), Err(Error::InvalidValue));
    // A mask enabling only CUs past the device's 104: bit 104 and up are ignored.
    assert_eq!(rt.stream_create_with_cu_mask(&[0, 0, 0, 0xffff_ff00]), Err(Error::InvalidValue));
    assert_eq!(rt.stream_create_with_cu_mask(&[0, 0, 0, 0, 0xffff_ffff, 0xffff_ffff]), Err(Error::InvalidValue));
    // Bits past the CU count are dropped when some CU remains.
    let s = rt.stream_create_with_cu_mask(&[0, 0, 0, 0xffff_ffff, 0xffff_ffff]).unwrap();
    let mut out = [7u32; 5];
    rt.stream_cu_mask(s, &mut out).unwrap();
    assert_eq!(out, [0, 0, 0, 0xff, 0]);
    // Too-short out buffers.
    for n in 0..4 {
        let mut short = vec![0u32; n];
        assert_eq!(rt.stream_cu_mask(s, &mut short), Err(Error::InvalidValue), "{n} dwords");
        assert_eq!(rt.stream_cu_mask(NULL, &mut short), Err(Error::InvalidValue), "{n} dwords");
    }
}

#[test]
fn cu_mask_of_streams_without_one_is_full() {
    let rt = runtime();
    let s = rt.stream_create(1).unwrap();
    for h in [NULL, LEGACY, PT, s] {
        let mut out = [0u32; 5];
        rt.stream_cu_mask(h, &mut out).unwrap();
        assert_eq!(out, [u32::MAX, u32::MAX, u32::MAX, 0xff, 0], "{h:?}");
    }
}
