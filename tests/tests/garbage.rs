//! No panic on any bad input: a deterministic pseudo-random walk of live, stale, special and
//! garbage handles and flags through every API. Every error must be one of HIP's codes for
//! argument or state problems, and the runtime must still work afterwards.

use std::sync::atomic::Ordering;

use aqueduct::{Error, EventHandle, KernelLaunch, StreamHandle, Timeout};
use aqueduct_tests::*;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }

    fn flags(&mut self) -> u32 {
        match self.below(4) {
            0 => 0,
            1 => 1,
            2 => self.below(8) as u32,
            _ => self.next() as u32,
        }
    }
}

const ALLOWED: [Error; 9] = [
    Error::InvalidValue,
    Error::OutOfMemory,
    Error::InvalidHandle,
    Error::ContextIsDestroyed,
    Error::NotReady,
    Error::InvalidDevice,
    Error::InvalidConfiguration,
    Error::LaunchFailure,
    Error::IllegalAddress,
];

fn check<T>(what: &str, r: aqueduct::Result<T>) {
    if let Err(e) = r {
        assert!(ALLOWED.contains(&e), "{what}: unexpected {e:?}");
    }
}

#[test]
fn random_garbage_through_every_api() {
    for seed in [1u64, 0x9e37_79b9_7f4a_7c15, 0xdead_beef_cafe_f00d] {
        let rt = runtime_devices(2);
        let k = register(rt.backend());
        let mut rng = Rng(seed);
        let cells: Vec<_> = (0..4).map(|_| cell64(0)).collect();
        let log = HostLog::watching(0);
        let mut streams: Vec<StreamHandle> = vec![StreamHandle::NULL, StreamHandle::LEGACY, StreamHandle::PER_THREAD];
        let mut events: Vec<EventHandle> = vec![EventHandle::NULL];
        for _ in 0..3000 {
            // A handle: live or stale ones we made, special values, or garbage near them.
            let s = match rng.below(6) {
                0..=2 => rng.pick(&streams),
                3 => StreamHandle(rng.pick(&events).0),
                4 => StreamHandle(rng.pick(&streams).0 ^ (1 << rng.below(64))),
                _ => StreamHandle(rng.next()),
            };
            let e = match rng.below(5) {
                0..=2 => rng.pick(&events),
                3 => EventHandle(rng.pick(&streams).0),
                _ => EventHandle(rng.pick(&events).0 ^ (1 << rng.below(64))),
            };
            let cell = rng.pick(&cells);
            let addr = match rng.below(8) {
                0 => 0,
                1 => addr64(cell) + 1 + rng.below(7),
                _ => addr64(cell),
            };
            match rng.below(28) {
                0 => match rt.stream_create_with_priority(rng.flags(), rng.next() as i32) {
                    Ok(h) => streams.push(h),
                    Err(err) => check("create", Err::<(), _>(err)),
                },
                1 => match rt.event_create(rng.flags()) {
                    Ok(h) => events.push(h),
                    Err(err) => check("event_create", Err::<(), _>(err)),
                },
                2 => check("destroy", rt.stream_destroy(s)),
                3 => check("event_destroy", rt.event_destroy(e)),
                4 => check("query", rt.stream_query(s)),
                5 => check("sync", rt.stream_synchronize_timeout(s, Timeout::ZERO)),
                6 => check("flags", rt.stream_flags(s)),
                7 => check("priority", rt.stream_priority(s)),
                8 => check("device", rt.stream_device(s)),
                9 => check("id", rt.stream_id(s)),
                10 => {
                    let mut out = vec![0u32; rng.below(7) as usize];
                    check("cu_mask", rt.stream_cu_mask(s, &mut out));
                }
                11 => {
                    let mask: Vec<u32> = (0..rng.below(12)).map(|_| rng.next() as u32 & rng.next() as u32).collect();
                    match rt.stream_create_with_cu_mask(&mask) {
                        Ok(h) => streams.push(h),
                        Err(err) => check("create_cu", Err::<(), _>(err)),
                    }
                }
                12 => check("record", rt.event_record(e, s, rng.flags())),
                13 => check("event_query", rt.event_query(e)),
                14 => check("event_sync", rt.event_synchronize_timeout(e, Timeout::ZERO)),
                15 => check("elapsed", rt.event_elapsed_time(e, rng.pick(&events))),
                16 => check("wait_event", rt.stream_wait_event(s, e, rng.flags())),
                17 => check("write32", rt.write_value32(s, addr, rng.next() as u32, rng.flags() & 3)),
                18 => check("write64", rt.write_value64(s, addr, rng.next(), rng.flags() & 3)),
                // Only Gte waits on small values are enqueued for real (the cells end at
                // u64::MAX), the other ops with bad arguments.
                19 => check("wait32", rt.wait_value32(s, addr, rng.below(4) as u32, 0, u32::MAX)),
                20 => check("wait64", rt.wait_value64(s, addr, rng.below(4), 4 + rng.below(9) as u32, u64::MAX)),
                21 => {
                    let args = addr64(cell).to_le_bytes();
                    let launch = KernelLaunch {
                        kernel_object: rng.pick(&[k.inc, k.inc, 0]),
                        grid: [rng.below(3) as u32, 1, 1],
                        workgroup: [rng.pick(&[0u16, 1, 64, 1024, 2048]), 1, 1],
                        group_segment_size: 0,
                        private_segment_size: 0,
                        kernarg: if rng.below(8) == 0 { &[0u8; 300] } else { &args },
                    };
                    check("launch", rt.launch_kernel(s, &launch));
                }
                22 => check("host_func", rt.launch_host_func(s, log.plain())),
                23 => check("marker", rt.marker(s)),
                24 => check("set_device", rt.set_device(rng.below(4) as u32)),
                25 => check("memset", rt.memset_async(s, addr, rng.next() as u32, rng.below(6) as u32, 1)),
                26 => {
                    let dst = if addr == 0 { 0 } else { addr64(cell) };
                    check("memcpy", rt.memcpy_async(s, dst, addr64(rng.pick(&cells)), rng.below(2) * 8));
                }
                _ => {
                    // Opening every gate now and then lets pending work drain.
                    for c in &cells {
                        c.store(u64::MAX, Ordering::SeqCst);
                    }
                    check("device_sync", rt.device_synchronize_timeout(Timeout::ZERO));
                }
            }
        }
        // Still a working runtime afterwards.
        for c in &cells {
            c.store(u64::MAX, Ordering::SeqCst);
        }
        for d in 0..2 {
            rt.set_device(d).unwrap();
            rt.device_reset().unwrap();
            let s = rt.stream_create(0).unwrap();
            let c = cell32(5);
            launch(&rt, s, k.inc, addr32(c)).unwrap();
            launch(&rt, StreamHandle::NULL, k.inc, addr32(c)).unwrap();
            rt.stream_synchronize(StreamHandle::NULL).unwrap();
            assert_eq!(read32(addr32(c)), 7);
        }
    }
}
