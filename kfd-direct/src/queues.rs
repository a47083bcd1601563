//! AQL queues of [`Kfd`] (docs/kfd-aql.md §1.5, §2): the five buffers of a queue, its
//! `amd_queue_t` and CWSR headers, `CREATE_QUEUE`, the doorbell slice, CU masks, and destroy.
//! A failing step of `create_queue` returns with `?`; one `OnDrop` guard undoes the earlier steps.

use core::cell::Cell;
use core::ptr::NonNull;
use portable_atomic::{AtomicU64, Ordering};

use aqueduct::aql::AqlRing;
use aqueduct::{CuMask, Priority};

use crate::abi::{self, limits, queue_properties, AmdQueue, CwsrHeader};
use crate::driver::{Bo, GTT_FLAGS, PAGE, VRAM_FLAGS};
use crate::faults::fault;
use crate::on_drop::OnDrop;
use crate::{Kfd, KfdError, KfdQueue, KfdResult, QueueRec, Sys, ERROR_WORD_OFFSET};

const fn kfd_priority(p: Priority) -> u32 {
    // §1.5 priority mapping: HIP High/Normal/Low → KFD 11/7/0 (thunk table for +2/0/−3).
    match p {
        Priority::High => 11,
        Priority::Normal => 7,
        Priority::Low => 0,
    }
}

impl<S: Sys> Kfd<S> {
    /// Kernel-argument slots past the ring's last one, so a dispatch's arguments may span
    /// several slots up to [`MAX_KERNARG_BYTES`](crate::MAX_KERNARG_BYTES) (`QueueDesc`).
    pub(crate) fn kernarg_overhang(&self) -> u32 {
        crate::MAX_KERNARG_BYTES.div_ceil(self.config.kernarg_bytes.max(16)).saturating_sub(1)
    }

    /// The KFD queue id of a live queue (for diagnostics and tests).
    pub fn queue_id(&self, queue: &KfdQueue) -> Option<u32> {
        self.state.lock().queues.get(usize::from(queue.slot)).and_then(|q| q.as_ref()).map(|q| q.queue_id)
    }

    pub(crate) fn create_queue(
        &self,
        device: u32,
        priority: Priority,
        cu_mask: Option<&CuMask>,
    ) -> KfdResult<KfdQueue> {
        self.check_process()?;
        let gi = device as usize;
        let g = *self.gpus.get(gi).ok_or(KfdError::InvalidDevice)?;
        let slot = {
            let st = self.state.lock();
            st.queues.iter().position(Option::is_none).ok_or(KfdError::Capacity("queues"))?
        };
        let packets = u64::from(self.config.ring_packets);
        let has_vram = g.node.props.vram_bytes > 0;
        // What is acquired, in this order; on any early return `undo` destroys the queue and
        // frees the buffers in reverse. It is defused once the queue is in the table.
        let held: [Cell<Option<Bo>>; 5] = Default::default();
        let queue_id: Cell<Option<u32>> = Cell::new(None);
        let undo = OnDrop::new(|| {
            if let Some(id) = queue_id.get() {
                let _ = self.drv.destroy_queue(id);
            }
            for bo in held.iter().rev().filter_map(Cell::get) {
                let _ = self.free_bo(&bo);
            }
        });
        let steps = [
            (PAGE, GTT_FLAGS, true),                                                  // amd_queue_t
            (packets * 64, GTT_FLAGS, true),                                          // ring (executable, §0 item 7)
            (g.sizes.eop_size, if has_vram { VRAM_FLAGS } else { GTT_FLAGS }, false), // EOP
            (g.sizes.cwsr_bo_size, GTT_FLAGS, true),                                  // CWSR area
            ((packets + u64::from(self.kernarg_overhang())) * u64::from(self.config.kernarg_bytes), GTT_FLAGS, true), // kernel arguments
        ];
        for (bo, (bytes, flags, cpu)) in held.iter().zip(steps) {
            bo.set(Some(self.alloc_bo(gi, bytes, flags, cpu)?));
        }
        let [Some(aq), Some(ring_bo), Some(eop), Some(cwsr), Some(kernarg)] = held.each_ref().map(Cell::get) else {
            return Err(KfdError::Capacity("queue buffers"));
        };
        // amd_queue_t (§4.3): the dispatch ids at +56/+128, profiling, CU and wave limits.
        let props = g.node.props;
        let q = AmdQueue {
            hsa_queue: abi::HsaQueue {
                queue_type: 0,
                features: 1,
                base_address: ring_bo.va,
                doorbell_signal: 0,
                size: self.config.ring_packets,
                reserved1: 0,
                id: slot as u64,
            },
            group_segment_aperture_base_hi: (g.lds_base >> 32) as u32,
            private_segment_aperture_base_hi: (g.scratch_base >> 32) as u32,
            max_cu_id: props.cu_count().saturating_sub(1),
            max_wave_id: (props.max_waves_per_simd * props.simd_per_cu).saturating_sub(1),
            read_dispatch_id_field_base_byte_offset: abi::AMD_QUEUE_READ_DISPATCH_ID as u32,
            queue_properties: queue_properties::IS_PTR64
                | if self.config.profiling { queue_properties::ENABLE_PROFILING } else { 0 },
            scratch_last_used_index: u64::MAX,
            ..AmdQueue::default()
        };
        // SAFETY: the page is CPU-mapped, page-aligned and ours until CREATE_QUEUE hands it to
        // the device; the error word after it starts at 0.
        unsafe {
            aq.ptr::<AmdQueue>(0).write(q);
            aq.ptr::<u64>(ERROR_WORD_OFFSET).write(0);
        }
        // CWSR headers, one per XCC (§1.5; THUNK fill_cwsr_header): errors go to our error word
        // and set the completion event, so waiters wake.
        let xcc = props.num_xcc.max(1);
        for i in 0..xcc {
            let hdr = CwsrHeader {
                debug_offset: (xcc - i) * g.sizes.cwsr_size,
                debug_size: g.sizes.debug_memory_size * xcc,
                err_payload_addr: aq.va + ERROR_WORD_OFFSET,
                err_event_id: self.completion_event,
                ..CwsrHeader::default()
            };
            // SAFETY: header i lies at i * cwsr_size inside the CPU-mapped CWSR buffer.
            unsafe { cwsr.ptr::<CwsrHeader>(u64::from(i) * u64::from(g.sizes.cwsr_size)).write(hdr) };
        }
        let ring_ptr = NonNull::new(ring_bo.ptr::<u8>(0)).ok_or(KfdError::InvalidArgument);
        let wptr = NonNull::new(aq.ptr::<portable_atomic::AtomicU64>(abi::AMD_QUEUE_WRITE_DISPATCH_ID));
        let rptr = NonNull::new(aq.ptr::<portable_atomic::AtomicU64>(abi::AMD_QUEUE_READ_DISPATCH_ID));
        let ring = match (ring_ptr, wptr, rptr) {
            // SAFETY: ring and indices lie in CPU-mapped buffers that live until queue_destroy.
            (Ok(b), Some(w), Some(r)) => unsafe { AqlRing::new(b, self.config.ring_packets, w, r) }.ok(),
            _ => None,
        };
        let Some(ring) = ring else {
            return Err(KfdError::InvalidArgument);
        };
        ring.invalidate_all();
        let mut args = abi::CreateQueueArgs {
            ring_base_address: ring_bo.va,
            write_pointer_address: aq.va + abi::AMD_QUEUE_WRITE_DISPATCH_ID,
            read_pointer_address: aq.va + abi::AMD_QUEUE_READ_DISPATCH_ID,
            ring_size: (packets * 64) as u32,
            gpu_id: g.node.gpu_id,
            queue_type: abi::queue_type::COMPUTE_AQL,
            queue_percentage: limits::MAX_QUEUE_PERCENTAGE,
            queue_priority: kfd_priority(priority),
            eop_buffer_address: eop.va,
            eop_buffer_size: g.sizes.eop_size,
            ctx_save_restore_address: cwsr.va,
            ctx_save_restore_size: g.sizes.cwsr_size,
            ctl_stack_size: g.sizes.ctl_stack_size,
            ..Default::default()
        };
        self.drv.create_queue(&mut args)?;
        queue_id.set(Some(args.queue_id));
        // The doorbell slice is mapped once per GPU and reused (§2).
        let slice = {
            let mut st = self.state.lock();
            match st.doorbells.get(gi).copied() {
                Some(0) => match self.drv.map_doorbells(args.doorbell_offset) {
                    Ok(p) => {
                        if let Some(d) = st.doorbells.get_mut(gi) {
                            *d = p as usize;
                        }
                        p as usize
                    }
                    // `st` is released before `undo` runs (dropped first, as declared later).
                    Err(e) => return Err(e),
                },
                Some(p) => p,
                None => 0,
            }
        };
        let db_off = (args.doorbell_offset & (limits::DOORBELL_SLICE_BYTES - 1)) as usize;
        let doorbell = NonNull::new(core::ptr::with_exposed_provenance_mut::<u64>(slice.wrapping_add(db_off)));
        let error_word = NonNull::new(aq.ptr::<AtomicU64>(ERROR_WORD_OFFSET));
        let (Some(doorbell), Some(error_word)) = (doorbell, error_word) else {
            return Err(KfdError::InvalidArgument);
        };
        if let Some(mask) = cu_mask {
            let words = cu_mask_words(mask, props.cu_count(), props.has_wgp());
            let n = (props.cu_count().div_ceil(32) as usize).clamp(1, words.len());
            self.drv.set_cu_mask(args.queue_id, words.get(..n).unwrap_or(&words))?;
        }
        let rec = QueueRec { gpu: gi as u8, queue_id: args.queue_id, amd_queue: aq, ring_bo, eop, cwsr, kernarg, ring };
        if let Some(f) = self.queue_faults.get(slot) {
            // Ordering: Release; the slot is reused, its old fault is gone before it is handed out.
            f.store(fault::NONE, Ordering::Release);
        }
        let lane = {
            let mut st = self.state.lock();
            match st.queues.get_mut(slot) {
                Some(s @ None) => *s = Some(rec),
                _ => return Err(KfdError::Capacity("queues")),
            }
            st.scratch_lane.get(gi).copied().unwrap_or(0)
        };
        undo.defuse();
        let queue = KfdQueue { slot: slot as u16, gpu: gi as u8, doorbell, error_word };
        // A queue created after the device's scratch grew gets it at once (docs/code-objects.md
        // §9); on failure the queue is destroyed again.
        if lane > 0 {
            if let Err(e) = self.grow_queue_scratch(slot, lane) {
                let _ = self.destroy_queue(&queue);
                return Err(e);
            }
        }
        Ok(queue)
    }

    pub(crate) fn destroy_queue(&self, queue: &KfdQueue) -> KfdResult<()> {
        let rec = {
            let mut st = self.state.lock();
            st.queues.get_mut(usize::from(queue.slot)).and_then(Option::take).ok_or(KfdError::InvalidArgument)?
        };
        if self.check_process().is_err() {
            return Err(KfdError::Forked);
        }
        self.drv.destroy_queue(rec.queue_id)?;
        self.free_queue_scratch(usize::from(queue.slot));
        for bo in [rec.kernarg, rec.cwsr, rec.eop, rec.ring_bo, rec.amd_queue] {
            self.free_bo(&bo)?;
        }
        Ok(())
    }
}

fn cu_mask_words(mask: &CuMask, cus: u32, wgp: bool) -> [u32; aqueduct::stream::CU_MASK_WORDS] {
    let mut w = *mask.words();
    if wgp {
        // GFX10+: CUs are enabled in work-group-processor pairs (ROCr SetCUMasking).
        for word in w.iter_mut() {
            let pairs = (*word | (*word >> 1)) & 0x5555_5555;
            *word = pairs | (pairs << 1);
        }
    }
    for (i, word) in w.iter_mut().enumerate() {
        let lo = i as u32 * 32;
        if lo >= cus {
            *word = 0;
        } else if cus - lo < 32 {
            *word &= (1u32 << (cus - lo)) - 1;
        }
    }
    w
}
