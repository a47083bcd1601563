//! Conditional graph nodes (IF, IF/ELSE, WHILE, SWITCH): handles, node parameters, and the
//! scheduler kernel the device runs to decide which body goes next.
//!
//! A conditional handle is the device address of a [`ConditionalCell`]: a 32-bit condition word
//! that device code sets ([`set_conditional`], `aqdGraphSetConditional` in C), with the default
//! value and flags next to it. A conditional node names its handle, its kind and its body graphs.
//!
//! At instantiation every conditional node gets a [`SchedulerFrame`] in host-visible memory and
//! a queue of its own (the "body queue"). The node's place in the parent sequence is a dispatch
//! of [`BuiltinKernel::GraphScheduler`](crate::backend::BuiltinKernel::GraphScheduler) (role
//! "entry") followed by a barrier-AND on the node's done signal. The scheduler reads the condition
//! word and publishes into the body queue either the chosen body's prebuilt packets followed by
//! the frame's "follow" packet, or the frame's exit packet alone: a barrier-AND that completes
//! the done signal. For WHILE the follow packet is another scheduler dispatch (role "tail", with
//! the barrier bit) that evaluates the word again; for IF and SWITCH it is the exit packet. No
//! host code runs between the entry and the exit; see `docs/conditional-graphs.md`.

use crate::sync::atomic64::AtomicU64;
use portable_atomic::{AtomicU32, Ordering};

use crate::aql::{
    BarrierPacket, FenceScope, Header, KernelDispatchPacket, Packet, PacketType, QueueFault, RawPacket, RingAddresses,
};
use crate::error::{Error, Result};
use crate::signal::AmdSignal;

/// Most bodies of one conditional node (SWITCH cases).
pub const MAX_BODIES: usize = 8;
/// Deepest nesting of conditional nodes inside bodies.
pub const MAX_DEPTH: usize = 4;
/// `hipGraphCondAssignDefault`: the handle's value is set to its default at every launch.
pub const COND_ASSIGN_DEFAULT: u32 = 1;

/// The kind of a conditional node (`hipGraphConditionalNodeType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u32)]
pub enum ConditionalKind {
    /// Body 0 once if the value is not 0; with two bodies, body 1 once if it is 0.
    If = 0,
    /// Body 0 again and again while the value is not 0 (checked before every iteration).
    While = 1,
    /// Body `value` once; none if the value is at least the number of bodies.
    Switch = 2,
}

impl ConditionalKind {
    /// The kind with C value `raw`.
    pub fn from_raw(raw: u32) -> Option<Self> {
        match raw {
            0 => Some(ConditionalKind::If),
            1 => Some(ConditionalKind::While),
            2 => Some(ConditionalKind::Switch),
            _ => None,
        }
    }

    /// Which body runs for condition `value` out of `count` bodies; `None` for none.
    pub fn choose(self, value: u32, count: usize) -> Option<usize> {
        match self {
            ConditionalKind::If if value != 0 => Some(0),
            ConditionalKind::If => (count == 2).then_some(1),
            ConditionalKind::While => (value != 0).then_some(0),
            ConditionalKind::Switch => usize::try_from(value).ok().filter(|v| *v < count),
        }
    }
}

/// The memory behind a conditional handle (32 bytes, host-visible, device-writable).
#[repr(C, align(16))]
#[derive(Debug)]
pub struct ConditionalCell {
    /// The condition word device code sets.
    pub value: AtomicU32,
    /// Assigned at every launch when `flags` has [`COND_ASSIGN_DEFAULT`].
    pub default: AtomicU32,
    /// 0 or [`COND_ASSIGN_DEFAULT`].
    pub flags: AtomicU32,
    /// 1 while a conditional node of a live graph uses the handle (a handle serves one node;
    /// destroying that graph frees it for another).
    pub bound: AtomicU32,
    /// Owners: the graph that created the handle and every executable built with it. The cell
    /// is freed by the last (an executable outlives its graph, and its kernels still write the
    /// word).
    pub refs: AtomicU32,
    /// Reserved, 0.
    pub reserved: [u32; 3],
}

impl ConditionalCell {
    /// Adds an owner.
    pub fn acquire(&self) {
        // Ordering: Relaxed; owners are added under the runtime's state lock.
        self.refs.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops an owner; true when it was the last (the caller frees the cell).
    pub fn release(&self) -> bool {
        // Ordering: AcqRel; the last owner sees every other owner's use before freeing.
        self.refs.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

/// A conditional handle (`hipGraphConditionalHandle`): the device address of its
/// [`ConditionalCell`]; the condition word is at that address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ConditionalHandle(pub u64);

impl ConditionalHandle {
    /// The cell behind the handle.
    ///
    /// # Safety
    /// The handle must come from a live graph's `conditional_handle_create`.
    pub unsafe fn cell<'a>(self) -> &'a ConditionalCell {
        // SAFETY: the caller vouches for a live cell; the address is 16-byte aligned.
        unsafe { &*core::ptr::with_exposed_provenance::<ConditionalCell>(self.0 as usize) }
    }
}

/// Sets a handle's condition word: what device code does (`aqdGraphSetConditional`).
///
/// # Safety
/// `handle` must be a live conditional handle.
pub unsafe fn set_conditional(handle: ConditionalHandle, value: u32) {
    // SAFETY: the caller vouches for the handle.
    let cell = unsafe { handle.cell() };
    // Ordering: Release; the scheduler's Acquire load sees what the kernel wrote before it.
    cell.value.store(value, Ordering::Release);
}

/// A conditional node's parameters: handle, kind and body graphs (raw graph handles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConditionalNode {
    /// The handle whose word decides.
    pub handle: ConditionalHandle,
    /// IF, WHILE or SWITCH.
    pub kind: ConditionalKind,
    /// Body graphs; the first `count` are used.
    pub bodies: [u64; MAX_BODIES],
    /// Number of bodies.
    pub count: u8,
}

impl ConditionalNode {
    /// Checks CUDA's size rules (WHILE 1, IF 1 or 2, SWITCH 1 to [`MAX_BODIES`]); bodies must
    /// be non-null.
    pub fn new(handle: ConditionalHandle, kind: ConditionalKind, bodies: &[u64]) -> Result<Self> {
        let ok = match kind {
            ConditionalKind::While => bodies.len() == 1,
            ConditionalKind::If => matches!(bodies.len(), 1 | 2),
            ConditionalKind::Switch => !bodies.is_empty(),
        };
        if !ok || handle.0 == 0 || bodies.contains(&0) {
            return Err(Error::InvalidValue);
        }
        if bodies.len() > MAX_BODIES {
            return Err(Error::NotSupported);
        }
        let mut b = [0; MAX_BODIES];
        for (d, s) in b.iter_mut().zip(bodies) {
            *d = *s;
        }
        Ok(ConditionalNode { handle, kind, bodies: b, count: bodies.len() as u8 })
    }

    /// The body graphs.
    pub fn bodies(&self) -> &[u64] {
        self.bodies.get(..usize::from(self.count)).unwrap_or(&[])
    }
}

/// Kernel arguments of the scheduler: the frame and the role.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerArgs {
    /// Address of the [`SchedulerFrame`].
    pub frame: u64,
    /// [`ROLE_ENTRY`] or [`ROLE_TAIL`].
    pub role: u32,
    /// Reserved, 0.
    pub reserved: u32,
}

/// The scheduler runs where the node sits in its parent sequence.
pub const ROLE_ENTRY: u32 = 0;
/// The scheduler runs after a WHILE body, in the body queue.
pub const ROLE_TAIL: u32 = 1;

/// One body as the scheduler publishes it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BodyRef {
    /// Address of the body's prebuilt packets.
    pub packets: u64,
    /// Number of packets.
    pub len: u32,
    /// Number of signals to set to 1 before the body is published.
    pub reset_len: u32,
    /// Address of the signal handles (u64 each) to set to 1.
    pub resets: u64,
}

/// A doorbell a device-side producer can ring: it stores `index + offset` (64-bit) at `address`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceDoorbell {
    /// Address of the doorbell word.
    pub address: u64,
    /// Added to the index of the last published packet.
    pub offset: u64,
}

/// What the scheduler of one conditional node reads (host-visible memory, 64-byte aligned).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy)]
pub struct SchedulerFrame {
    /// Arguments of the entry dispatch (its kernarg points here).
    pub entry_args: SchedulerArgs,
    /// Arguments of the tail dispatch (its kernarg points here).
    pub tail_args: SchedulerArgs,
    /// Address of the condition word.
    pub condition: u64,
    /// [`ConditionalKind`] as u32.
    pub kind: u32,
    /// Number of bodies.
    pub body_count: u32,
    /// The bodies.
    pub bodies: [BodyRef; MAX_BODIES],
    /// The body queue's ring.
    pub ring: RingAddresses,
    /// The body queue's doorbell.
    pub doorbell: DeviceDoorbell,
    /// The tail dispatch (WHILE): the scheduler again, role tail, barrier bit.
    pub tail: RawPacket,
    /// The exit: a barrier-AND with the barrier bit completing the node's done signal.
    pub exit: RawPacket,
}

/// A one-work-item kernel dispatch of `kernel` with its arguments at `kernarg` and system-scope
/// fences: the scheduler's entry and tail dispatches.
pub fn single_dispatch(kernel: u64, kernarg: u64, barrier: bool) -> RawPacket {
    let p = KernelDispatchPacket {
        header: Header::new(PacketType::KernelDispatch, barrier, FenceScope::System, FenceScope::System).0,
        setup: 3,
        workgroup_size_x: 1,
        workgroup_size_y: 1,
        workgroup_size_z: 1,
        grid_size_x: 1,
        grid_size_y: 1,
        grid_size_z: 1,
        kernel_object: kernel,
        kernarg_address: kernarg,
        ..Default::default()
    };
    RawPacket(*p.words())
}

/// A barrier-AND on `deps` that completes `completion`.
fn barrier_and(deps: [u64; 5], completion: u64, barrier: bool) -> RawPacket {
    let mut b = BarrierPacket::and(deps, completion);
    b.header = Header::new(PacketType::BarrierAnd, barrier, FenceScope::System, FenceScope::System).0;
    RawPacket(*b.words())
}

impl SchedulerFrame {
    /// The frame of a node whose frame is stored at `at`: the scheduler kernel `scheduler`
    /// reads the word at `condition` and publishes one of `bodies` (at most [`MAX_BODIES`])
    /// into the body queue (`ring`, `doorbell`); the exit completes the node's done signal.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        at: u64,
        scheduler: u64,
        condition: u64,
        kind: ConditionalKind,
        bodies: &[BodyRef],
        ring: RingAddresses,
        doorbell: DeviceDoorbell,
        done: u64,
    ) -> SchedulerFrame {
        let mut refs = [BodyRef::default(); MAX_BODIES];
        for (r, b) in refs.iter_mut().zip(bodies) {
            *r = *b;
        }
        let count = bodies.len().min(MAX_BODIES);
        let tail_args = at + core::mem::offset_of!(SchedulerFrame, tail_args) as u64;
        SchedulerFrame {
            entry_args: SchedulerArgs { frame: at, role: ROLE_ENTRY, reserved: 0 },
            tail_args: SchedulerArgs { frame: at, role: ROLE_TAIL, reserved: 0 },
            condition,
            kind: kind as u32,
            body_count: count as u32,
            bodies: refs,
            ring,
            doorbell,
            tail: single_dispatch(scheduler, tail_args, true),
            exit: barrier_and([0; 5], done, true),
        }
    }

    /// The node's two packets in its parent sequence, for the frame stored at `at`: the
    /// scheduler's entry dispatch (the node's place, with the barrier bit the plan decides) and
    /// a barrier-AND on the node's done signal that completes `completion` (0: none).
    pub fn entry_packets(at: u64, scheduler: u64, done: u64, barrier: bool, completion: u64) -> [RawPacket; 2] {
        let entry_args = at + core::mem::offset_of!(SchedulerFrame, entry_args) as u64;
        [single_dispatch(scheduler, entry_args, barrier), barrier_and([done, 0, 0, 0, 0], completion, false)]
    }
}

// The offsets the device's scheduler kernel (kfd-direct/blit/blit.cl) reads.
const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(SchedulerFrame, condition) == 32);
    assert!(offset_of!(SchedulerFrame, kind) == 40);
    assert!(offset_of!(SchedulerFrame, body_count) == 44);
    assert!(offset_of!(SchedulerFrame, bodies) == 48);
    assert!(size_of::<BodyRef>() == 24);
    assert!(offset_of!(SchedulerFrame, ring) == 240);
    assert!(offset_of!(SchedulerFrame, doorbell) == 272);
    assert!(offset_of!(SchedulerFrame, tail) == 320);
    assert!(offset_of!(SchedulerFrame, exit) == 384);
    assert!(size_of::<SchedulerFrame>() == 448);
    assert!(size_of::<SchedulerArgs>() == 16);
};

/// Runs the scheduler for one dispatch: what the built-in kernel does on any device.
///
/// # Safety
/// `args.frame` must point at a live [`SchedulerFrame`] whose bodies, signals and ring are live
/// (the executable keeps them until its launches are done).
pub unsafe fn run_scheduler(args: SchedulerArgs) -> core::result::Result<(), QueueFault> {
    // SAFETY: the caller vouches for the frame.
    let frame = unsafe { &*core::ptr::with_exposed_provenance::<SchedulerFrame>(args.frame as usize) };
    let kind = ConditionalKind::from_raw(frame.kind).ok_or(QueueFault::KernelError)?;
    // SAFETY: the condition word is a live u32 (the frame's contract).
    let word = unsafe { &*core::ptr::with_exposed_provenance::<AtomicU32>(frame.condition as usize) };
    // Ordering: Acquire pairs with the Release store of the kernel that set the value.
    let value = word.load(Ordering::Acquire);
    let body = kind.choose(value, frame.body_count as usize);
    if args.role == ROLE_TAIL && kind != ConditionalKind::While {
        return Err(QueueFault::KernelError);
    }
    let Some(b) = body.and_then(|b| frame.bodies.get(b)) else {
        return publish(frame, &[], &frame.exit);
    };
    for k in 0..b.reset_len as usize {
        // SAFETY: `resets` holds `reset_len` live signal handles (the frame's contract).
        let h = unsafe { &*core::ptr::with_exposed_provenance::<AtomicU64>(b.resets as usize + 8 * k) };
        // Ordering: Relaxed; the handle list is written once at instantiation.
        let handle = h.load(Ordering::Relaxed);
        // SAFETY: the handle names a live signal of the executable.
        unsafe { &*core::ptr::with_exposed_provenance::<AmdSignal>(handle as usize) }.reset(1);
    }
    // SAFETY: `packets` holds `len` prebuilt packets (the frame's contract).
    let packets = unsafe {
        core::slice::from_raw_parts(core::ptr::with_exposed_provenance::<RawPacket>(b.packets as usize), b.len as usize)
    };
    let follow = if kind == ConditionalKind::While { &frame.tail } else { &frame.exit };
    publish(frame, packets, follow)
}

/// Publishes `packets` then `last` into the body queue and rings its doorbell: the AQL producer
/// protocol (docs/kfd-aql.md, "Ring publish protocol"), run by the device.
fn publish(frame: &SchedulerFrame, packets: &[RawPacket], last: &RawPacket) -> core::result::Result<(), QueueFault> {
    let n = u32::try_from(packets.len() + 1).map_err(|_| QueueFault::KernelError)?;
    // The instantiation sized the ring for the longest body plus the scheduler and its follow
    // packet, and one body is in flight at a time, so there is room without waiting.
    // SAFETY: the frame describes its live body queue (run_scheduler's contract).
    let ring = unsafe { frame.ring.ring() }.map_err(|_| QueueFault::KernelError)?;
    let mut res = ring.reserve(n, 0).map_err(|_| QueueFault::KernelError)?;
    res.write_batch(packets);
    res.write(last);
    let last_index = res.finish();
    // SAFETY: the doorbell word is live while the queue is (the frame's contract).
    let bell = unsafe { &*core::ptr::with_exposed_provenance::<AtomicU64>(frame.doorbell.address as usize) };
    // Ordering: Release after the packets' Release headers. A plain store: the scheduler is the
    // body queue's only producer, and a doorbell's first value may be any marker (the emulator's
    // "never rung" is u64::MAX), so it is not a maximum.
    bell.store(last_index.wrapping_add(frame.doorbell.offset), Ordering::Release);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_follow_cuda() {
        use ConditionalKind::*;
        assert_eq!(If.choose(3, 1), Some(0));
        assert_eq!(If.choose(0, 1), None);
        assert_eq!(If.choose(0, 2), Some(1));
        assert_eq!(While.choose(1, 1), Some(0));
        assert_eq!(While.choose(0, 1), None);
        assert_eq!(Switch.choose(2, 3), Some(2));
        assert_eq!(Switch.choose(3, 3), None);
        let h = ConditionalHandle(16);
        assert!(ConditionalNode::new(h, While, &[1, 2]).is_err());
        assert!(ConditionalNode::new(h, If, &[1, 2, 3]).is_err());
        assert!(ConditionalNode::new(h, Switch, &[]).is_err());
        assert!(ConditionalNode::new(h, If, &[0]).is_err());
        assert_eq!(ConditionalNode::new(h, Switch, &[1; 9]), Err(Error::NotSupported));
        assert_eq!(ConditionalNode::new(h, Switch, &[4, 5, 6]).unwrap().bodies(), &[4, 5, 6]);
    }
}
