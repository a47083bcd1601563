//! Node parameters in executables (docs/hip-semantics.md, "Graphs"):
//! `hipGraphExec*NodeSetParams` and the event variants, each checked as its graph counterpart
//! and patched into the executable ([`edit_exec`]).

use std::ffi::{c_uint, c_void};

use crate::error::{api, HipResult, INVALID_VALUE};
use crate::global::global;
use crate::pitched::Memcpy3DParms;
use crate::Handle;

use super::model::*;
use super::nodes::*;

use super::exec::edit_exec;

/// `hipGraphExecKernelNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid, its argument lists as `hipModuleLaunchKernel`'s.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecKernelNodeSetParams(
    exec: Handle,
    node: Handle,
    p: *const KernelNodeParams,
) -> i32 {
    api(|| {
        let new = kernel_kind(p)?;
        edit_exec(exec, node, |k| match k {
            Kind::Kernel(_) => Ok(new),
            _ => Err(INVALID_VALUE),
        })
    })
}

fn exec_set_copy(exec: Handle, node: Handle, new: HipResult<Kind>) -> HipResult {
    let new = new?;
    edit_exec(exec, node, |k| match k {
        Kind::Copy(_) => Ok(new),
        _ => Err(INVALID_VALUE),
    })
}

/// `hipGraphExecMemcpyNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecMemcpyNodeSetParams(exec: Handle, node: Handle, p: *mut Memcpy3DParms) -> i32 {
    api(|| exec_set_copy(exec, node, copy_3d(p)))
}

/// `hipGraphExecMemcpyNodeSetParams1D`.
///
/// # Safety
/// `dst` and `src` stay valid for `bytes` bytes while the executable can run.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecMemcpyNodeSetParams1D(
    exec: Handle,
    node: Handle,
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_uint,
) -> i32 {
    api(|| exec_set_copy(exec, node, copy_1d(global()?, dst as usize as u64, src as usize as u64, bytes, kind)))
}

/// `hipGraphExecMemcpyNodeSetParamsFromSymbol`.
///
/// # Safety
/// As `hipGraphExecMemcpyNodeSetParams1D`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecMemcpyNodeSetParamsFromSymbol(
    exec: Handle,
    node: Handle,
    dst: *mut c_void,
    symbol: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| exec_set_copy(exec, node, from_symbol(global()?, dst, symbol, bytes, offset, kind)))
}

/// `hipGraphExecMemcpyNodeSetParamsToSymbol`.
///
/// # Safety
/// As `hipGraphExecMemcpyNodeSetParams1D`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecMemcpyNodeSetParamsToSymbol(
    exec: Handle,
    node: Handle,
    symbol: *const c_void,
    src: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| exec_set_copy(exec, node, to_symbol(global()?, symbol, src, bytes, offset, kind)))
}

/// `hipGraphExecMemsetNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecMemsetNodeSetParams(exec: Handle, node: Handle, p: *const MemsetParams) -> i32 {
    api(|| {
        let new = memset_kind(global()?, p)?;
        edit_exec(exec, node, |k| match k {
            Kind::Memset(_) => Ok(new),
            _ => Err(INVALID_VALUE),
        })
    })
}

/// `hipGraphExecHostNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid; the function and its data stay valid while the executable can run.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecHostNodeSetParams(exec: Handle, node: Handle, p: *const HostNodeParams) -> i32 {
    api(|| {
        let new = host_kind(p)?;
        edit_exec(exec, node, |k| match k {
            Kind::Host { .. } => Ok(new),
            _ => Err(INVALID_VALUE),
        })
    })
}

/// `hipGraphExecChildGraphNodeSetParams`: the new child must have the old one's shape (node
/// types pairwise in topological order, and the same edges).
#[no_mangle]
pub extern "C" fn hipGraphExecChildGraphNodeSetParams(exec: Handle, node: Handle, child: Handle) -> i32 {
    api(|| {
        let new = child_kind(child)?;
        edit_exec(exec, node, |k| match k {
            Kind::Child(_) => Ok(new),
            _ => Err(INVALID_VALUE),
        })
    })
}

fn exec_set_event(exec: Handle, node: Handle, event: Handle, record: bool) -> HipResult {
    let e = event_of(global()?, event)?;
    edit_exec(exec, node, |k| match (k, record) {
        (Kind::EventRecord(_), true) => Ok(Kind::EventRecord(e)),
        (Kind::EventWait(_), false) => Ok(Kind::EventWait(e)),
        _ => Err(INVALID_VALUE),
    })
}

/// `hipGraphExecEventRecordNodeSetEvent`.
#[no_mangle]
pub extern "C" fn hipGraphExecEventRecordNodeSetEvent(exec: Handle, node: Handle, event: Handle) -> i32 {
    api(|| exec_set_event(exec, node, event, true))
}

/// `hipGraphExecEventWaitNodeSetEvent`.
#[no_mangle]
pub extern "C" fn hipGraphExecEventWaitNodeSetEvent(exec: Handle, node: Handle, event: Handle) -> i32 {
    api(|| exec_set_event(exec, node, event, false))
}
