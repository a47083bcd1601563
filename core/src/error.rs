//! The error type. Every value equals HIP's `hipError_t` number, so the C ABI passes errors
//! through unchanged (`hipErrorInvalidValue` is 1, `hipErrorStreamDetached` is 916, ...).

use core::fmt;

/// Result alias used throughout the crate.
pub type Result<T> = core::result::Result<T, Error>;

/// A failed operation, numbered as HIP numbers it.
///
/// `hipErrorInvalidResourceHandle` and `hipErrorMemoryAllocation` are second names for
/// [`Error::InvalidHandle`] and [`Error::OutOfMemory`]; see the associated constants.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// `hipErrorInvalidValue`: a bad flag, mode, size or out-parameter.
    InvalidValue = 1,
    /// `hipErrorOutOfMemory`: a fixed-capacity table or a backend pool is full.
    OutOfMemory = 2,
    /// `hipErrorNotInitialized`.
    NotInitialized = 3,
    /// `hipErrorInvalidConfiguration`: a launch geometry the hardware cannot run.
    InvalidConfiguration = 9,
    /// `hipErrorInvalidSymbol`: no device variable of that name.
    InvalidSymbol = 13,
    /// `hipErrorNoDevice`: the backend reports no device.
    NoDevice = 100,
    /// `hipErrorInvalidDevice`: a device ordinal out of range.
    InvalidDevice = 101,
    /// `hipErrorInvalidImage`: bytes that are not a loadable code object.
    InvalidImage = 200,
    /// `hipErrorInvalidContext`.
    InvalidContext = 201,
    /// `hipErrorNoBinaryForGpu`: a code object (or fat binary) with no code for the device.
    NoBinaryForGpu = 209,
    /// `hipErrorInvalidKernelFile`: a code object whose metadata cannot describe a launch.
    InvalidKernelFile = 218,
    /// `hipErrorInvalidHandle` (also `hipErrorInvalidResourceHandle`).
    InvalidHandle = 400,
    /// `hipErrorIllegalState`.
    IllegalState = 401,
    /// `hipErrorNotFound`.
    NotFound = 500,
    /// `hipErrorNotReady`: the work is still pending (a query answer, not a sticky error); also a
    /// wait that ran out of time.
    NotReady = 600,
    /// `hipErrorIllegalAddress`: the device faulted on a memory access.
    IllegalAddress = 700,
    /// `hipErrorLaunchOutOfResources`.
    LaunchOutOfResources = 701,
    /// `hipErrorLaunchTimeOut`.
    LaunchTimeOut = 702,
    /// `hipErrorContextIsDestroyed`: a stale handle, as HIP before 7.0 reported it.
    ContextIsDestroyed = 709,
    /// `hipErrorAssert`: a device-side assertion.
    Assert = 710,
    /// `hipErrorLaunchFailure`: the queue reported an error while running this stream's work.
    LaunchFailure = 719,
    /// `hipErrorNotSupported`.
    NotSupported = 801,
    /// `hipErrorStreamCaptureUnsupported`.
    StreamCaptureUnsupported = 900,
    /// `hipErrorStreamCaptureInvalidated`.
    StreamCaptureInvalidated = 901,
    /// `hipErrorStreamCaptureMerge`.
    StreamCaptureMerge = 902,
    /// `hipErrorStreamCaptureUnmatched`.
    StreamCaptureUnmatched = 903,
    /// `hipErrorStreamCaptureUnjoined`.
    StreamCaptureUnjoined = 904,
    /// `hipErrorStreamCaptureIsolation`.
    StreamCaptureIsolation = 905,
    /// `hipErrorStreamCaptureImplicit`.
    StreamCaptureImplicit = 906,
    /// `hipErrorCapturedEvent`.
    CapturedEvent = 907,
    /// `hipErrorStreamCaptureWrongThread`.
    StreamCaptureWrongThread = 908,
    /// `hipErrorGraphExecUpdateFailure`.
    GraphExecUpdateFailure = 910,
    /// `hipErrorStreamDetached` (916; CUDA's value is 917).
    StreamDetached = 916,
    /// `hipErrorUnknown`.
    Unknown = 999,
}

impl Error {
    /// `hipErrorInvalidResourceHandle`, the second name of 400.
    pub const INVALID_RESOURCE_HANDLE: Error = Error::InvalidHandle;
    /// `hipErrorMemoryAllocation`, the second name of 2.
    pub const MEMORY_ALLOCATION: Error = Error::OutOfMemory;

    /// Every variant, in numeric order.
    pub const ALL: [Error; 34] = [
        Error::InvalidValue,
        Error::OutOfMemory,
        Error::NotInitialized,
        Error::InvalidConfiguration,
        Error::InvalidSymbol,
        Error::NoDevice,
        Error::InvalidDevice,
        Error::InvalidImage,
        Error::InvalidContext,
        Error::NoBinaryForGpu,
        Error::InvalidKernelFile,
        Error::InvalidHandle,
        Error::IllegalState,
        Error::NotFound,
        Error::NotReady,
        Error::IllegalAddress,
        Error::LaunchOutOfResources,
        Error::LaunchTimeOut,
        Error::ContextIsDestroyed,
        Error::Assert,
        Error::LaunchFailure,
        Error::NotSupported,
        Error::StreamCaptureUnsupported,
        Error::StreamCaptureInvalidated,
        Error::StreamCaptureMerge,
        Error::StreamCaptureUnmatched,
        Error::StreamCaptureUnjoined,
        Error::StreamCaptureIsolation,
        Error::StreamCaptureImplicit,
        Error::CapturedEvent,
        Error::StreamCaptureWrongThread,
        Error::GraphExecUpdateFailure,
        Error::StreamDetached,
        Error::Unknown,
    ];

    /// The `hipError_t` value.
    pub const fn code(self) -> i32 {
        self as i32
    }

    /// The error whose `hipError_t` value is `code`; `None` for 0 (success) and unknown values.
    pub fn from_code(code: i32) -> Option<Error> {
        Error::ALL.iter().copied().find(|e| e.code() == code)
    }

    /// HIP's name for the error (`hipGetErrorName`).
    pub const fn name(self) -> &'static str {
        match self {
            Error::InvalidValue => "hipErrorInvalidValue",
            Error::OutOfMemory => "hipErrorOutOfMemory",
            Error::NotInitialized => "hipErrorNotInitialized",
            Error::InvalidConfiguration => "hipErrorInvalidConfiguration",
            Error::InvalidSymbol => "hipErrorInvalidSymbol",
            Error::InvalidImage => "hipErrorInvalidImage",
            Error::NoBinaryForGpu => "hipErrorNoBinaryForGpu",
            Error::InvalidKernelFile => "hipErrorInvalidKernelFile",
            Error::NoDevice => "hipErrorNoDevice",
            Error::InvalidDevice => "hipErrorInvalidDevice",
            Error::InvalidContext => "hipErrorInvalidContext",
            Error::InvalidHandle => "hipErrorInvalidHandle",
            Error::IllegalState => "hipErrorIllegalState",
            Error::NotFound => "hipErrorNotFound",
            Error::NotReady => "hipErrorNotReady",
            Error::IllegalAddress => "hipErrorIllegalAddress",
            Error::LaunchOutOfResources => "hipErrorLaunchOutOfResources",
            Error::LaunchTimeOut => "hipErrorLaunchTimeOut",
            Error::ContextIsDestroyed => "hipErrorContextIsDestroyed",
            Error::Assert => "hipErrorAssert",
            Error::LaunchFailure => "hipErrorLaunchFailure",
            Error::NotSupported => "hipErrorNotSupported",
            Error::StreamCaptureUnsupported => "hipErrorStreamCaptureUnsupported",
            Error::StreamCaptureInvalidated => "hipErrorStreamCaptureInvalidated",
            Error::StreamCaptureMerge => "hipErrorStreamCaptureMerge",
            Error::StreamCaptureUnmatched => "hipErrorStreamCaptureUnmatched",
            Error::StreamCaptureUnjoined => "hipErrorStreamCaptureUnjoined",
            Error::StreamCaptureIsolation => "hipErrorStreamCaptureIsolation",
            Error::StreamCaptureImplicit => "hipErrorStreamCaptureImplicit",
            Error::CapturedEvent => "hipErrorCapturedEvent",
            Error::StreamCaptureWrongThread => "hipErrorStreamCaptureWrongThread",
            Error::GraphExecUpdateFailure => "hipErrorGraphExecUpdateFailure",
            Error::StreamDetached => "hipErrorStreamDetached",
            Error::Unknown => "hipErrorUnknown",
        }
    }

    /// A one-line description (`hipGetErrorString`).
    pub const fn description(self) -> &'static str {
        match self {
            Error::InvalidValue => "invalid argument",
            Error::OutOfMemory => "out of memory",
            Error::NotInitialized => "initialization error",
            Error::InvalidConfiguration => "invalid configuration argument",
            Error::InvalidSymbol => "invalid device symbol",
            Error::InvalidImage => "device kernel image is invalid",
            Error::NoBinaryForGpu => "no kernel image is available for execution on the device",
            Error::InvalidKernelFile => "invalid kernel file",
            Error::NoDevice => "no ROCm-capable device is detected",
            Error::InvalidDevice => "invalid device ordinal",
            Error::InvalidContext => "invalid device context",
            Error::InvalidHandle => "invalid resource handle",
            Error::IllegalState => "the operation cannot be performed in the present state",
            Error::NotFound => "named symbol not found",
            Error::NotReady => "device not ready",
            Error::IllegalAddress => "an illegal memory access was encountered",
            Error::LaunchOutOfResources => "too many resources requested for launch",
            Error::LaunchTimeOut => "the launch timed out and was terminated",
            Error::ContextIsDestroyed => "context is destroyed",
            Error::Assert => "device-side assert triggered",
            Error::LaunchFailure => "unspecified launch failure",
            Error::NotSupported => "operation not supported",
            Error::StreamCaptureUnsupported => "operation not permitted when stream is capturing",
            Error::StreamCaptureInvalidated => "operation failed due to a previous error during capture",
            Error::StreamCaptureMerge => "operation would result in a merge of separate capture sequences",
            Error::StreamCaptureUnmatched => "capture was not ended in the same stream as it began",
            Error::StreamCaptureUnjoined => "capturing stream has unjoined work",
            Error::StreamCaptureIsolation => "dependency created on uncaptured work in another stream",
            Error::StreamCaptureImplicit => {
                "operation would make the legacy stream depend on a capturing blocking stream"
            }
            Error::CapturedEvent => "operation not permitted on an event last recorded in a capturing stream",
            Error::StreamCaptureWrongThread => {
                "attempt to terminate a thread-local capture sequence from another thread"
            }
            Error::GraphExecUpdateFailure => "the graph update was not performed",
            Error::StreamDetached => "the stream is detached",
            Error::Unknown => "unknown error",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.name(), self.code(), self.description())
    }
}

impl core::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_hips() {
        assert_eq!(Error::InvalidValue.code(), 1);
        assert_eq!(Error::OutOfMemory.code(), 2);
        assert_eq!(Error::NoDevice.code(), 100);
        assert_eq!(Error::InvalidDevice.code(), 101);
        assert_eq!(Error::InvalidHandle.code(), 400);
        assert_eq!(Error::INVALID_RESOURCE_HANDLE.code(), 400);
        assert_eq!(Error::IllegalState.code(), 401);
        assert_eq!(Error::NotReady.code(), 600);
        assert_eq!(Error::ContextIsDestroyed.code(), 709);
        assert_eq!(Error::LaunchFailure.code(), 719);
        assert_eq!(Error::StreamCaptureUnsupported.code(), 900);
        assert_eq!(Error::StreamCaptureWrongThread.code(), 908);
        assert_eq!(Error::StreamDetached.code(), 916);
        for e in Error::ALL {
            assert_eq!(Error::from_code(e.code()), Some(e));
            assert!(e.name().starts_with("hipError"));
        }
        assert_eq!(Error::from_code(0), None);
        assert_eq!(Error::from_code(909), None);
    }
}
