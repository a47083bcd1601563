//! [`KfdError`]: what went wrong, at which step, with the system's errno.
//!
//! The backend's own API (open, code objects) returns it; the [`aqueduct::Backend`] methods map
//! it to HIP's numbers ([`aqueduct::Error`]) and keep the full error readable through
//! `Kfd::last_error`.

use core::fmt;

use aqueduct::Error;

use crate::sys::Errno;

/// The step of the driver protocol a system call belonged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Op {
    /// Reading the sysfs topology.
    Topology,
    /// `open("/dev/kfd")`.
    OpenKfd,
    /// `open("/dev/dri/renderD<minor>")`.
    OpenRenderNode,
    /// `GET_VERSION`.
    GetVersion,
    /// `ACQUIRE_VM`.
    AcquireVm,
    /// `GET_PROCESS_APERTURES_NEW`.
    GetApertures,
    /// Reserving GPU VA (anonymous `mmap`).
    ReserveVa,
    /// `ALLOC_MEMORY_OF_GPU`.
    AllocMemory,
    /// `MAP_MEMORY_TO_GPU`.
    MapMemory,
    /// CPU `mmap` of a buffer.
    CpuMap,
    /// `UNMAP_MEMORY_FROM_GPU`.
    UnmapMemory,
    /// `FREE_MEMORY_OF_GPU`.
    FreeMemory,
    /// `CREATE_EVENT`.
    CreateEvent,
    /// `DESTROY_EVENT`.
    DestroyEvent,
    /// `SET_EVENT`.
    SetEvent,
    /// `WAIT_EVENTS`.
    WaitEvents,
    /// `CREATE_QUEUE`.
    CreateQueue,
    /// `DESTROY_QUEUE`.
    DestroyQueue,
    /// `SET_CU_MASK`.
    SetCuMask,
    /// `mmap` of the doorbell slice.
    MapDoorbell,
    /// `GET_CLOCK_COUNTERS`.
    ClockCounters,
    /// `EXPORT_DMABUF`.
    ExportDmabuf,
    /// `IMPORT_DMABUF`.
    ImportDmabuf,
    /// `GET_DMABUF_INFO`.
    DmabufInfo,
}

/// An error of the kfd-direct backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum KfdError {
    /// No usable AMD GPU: no `/dev/kfd`, no topology, or no GPU node that opens.
    NoDevice,
    /// A system call failed.
    Sys {
        /// Which step.
        op: Op,
        /// The errno.
        errno: Errno,
    },
    /// The driver's interface version is not supported (major must be 1).
    UnsupportedVersion {
        /// Reported major.
        major: u32,
        /// Reported minor.
        minor: u32,
    },
    /// The backend was opened in another process: after `fork()` the child must open its own.
    Forked,
    /// A fixed capacity of the backend is exhausted (names which).
    Capacity(&'static str),
    /// Not a usable AMDHSA code object (says what is wrong).
    CodeObject(amdhsa::Error),
    /// A code object built for another target than the device's.
    WrongTarget,
    /// No kernel of that name in the code object.
    KernelNotFound,
    /// No device variable of that name in the code object.
    SymbolNotFound,
    /// Something this backend does not do on this device (names what).
    Unsupported(&'static str),
    /// An argument is out of range.
    InvalidArgument,
    /// The device index does not exist.
    InvalidDevice,
}

impl fmt::Display for KfdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KfdError::NoDevice => write!(f, "no AMD GPU: /dev/kfd or the KFD topology is missing"),
            KfdError::Sys { op, errno } => write!(f, "{op:?} failed with {errno}"),
            KfdError::UnsupportedVersion { major, minor } => {
                write!(f, "unsupported KFD interface version {major}.{minor}")
            }
            KfdError::Forked => write!(f, "the KFD device was opened by another process (used after fork)"),
            KfdError::Capacity(what) => write!(f, "out of {what}"),
            KfdError::CodeObject(e) => write!(f, "not a usable code object: {e}"),
            KfdError::WrongTarget => write!(f, "the code object is built for another gfx target"),
            KfdError::KernelNotFound => write!(f, "no kernel of that name in the code object"),
            KfdError::SymbolNotFound => write!(f, "no variable of that name in the code object"),
            KfdError::Unsupported(what) => write!(f, "not supported: {what}"),
            KfdError::InvalidArgument => write!(f, "invalid argument"),
            KfdError::InvalidDevice => write!(f, "invalid device"),
        }
    }
}

impl core::error::Error for KfdError {}

impl From<KfdError> for Error {
    fn from(e: KfdError) -> Error {
        match e {
            KfdError::NoDevice => Error::NoDevice,
            KfdError::Sys { errno: Errno::ENOMEM | Errno::ENOSPC, .. } | KfdError::Capacity(_) => Error::OutOfMemory,
            KfdError::Sys { .. } => Error::Unknown,
            KfdError::UnsupportedVersion { .. } => Error::NotSupported,
            KfdError::Forked => Error::NotInitialized,
            KfdError::CodeObject(_) => Error::InvalidImage,
            KfdError::WrongTarget => Error::NoBinaryForGpu,
            KfdError::KernelNotFound => Error::NotFound,
            KfdError::SymbolNotFound => Error::InvalidSymbol,
            KfdError::Unsupported(_) => Error::NotSupported,
            KfdError::InvalidArgument => Error::InvalidValue,
            KfdError::InvalidDevice => Error::InvalidDevice,
        }
    }
}

/// Result of the backend's own API.
pub type KfdResult<T> = core::result::Result<T, KfdError>;
