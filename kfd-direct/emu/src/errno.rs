//! [`Errno`]: the error numbers the emulated syscalls return, as a newtype with constants (never
//! an enum: the kernel may return any value).

use core::fmt;

/// A Linux error number, as the failing syscall would set `errno`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// Operation not permitted.
    pub const EPERM: Errno = Errno(1);
    /// No such file or directory.
    pub const ENOENT: Errno = Errno(2);
    /// No such process (KFD: process not bound to the device).
    pub const ESRCH: Errno = Errno(3);
    /// I/O error.
    pub const EIO: Errno = Errno(5);
    /// Bad file descriptor (also: KFD fd used from another process).
    pub const EBADF: Errno = Errno(9);
    /// Resource temporarily unavailable.
    pub const EAGAIN: Errno = Errno(11);
    /// Out of memory.
    pub const ENOMEM: Errno = Errno(12);
    /// Permission denied.
    pub const EACCES: Errno = Errno(13);
    /// Bad address (a user pointer the kernel could not copy).
    pub const EFAULT: Errno = Errno(14);
    /// Device or resource busy.
    pub const EBUSY: Errno = Errno(16);
    /// File exists.
    pub const EEXIST: Errno = Errno(17);
    /// No such device.
    pub const ENODEV: Errno = Errno(19);
    /// Not a directory.
    pub const ENOTDIR: Errno = Errno(20);
    /// Is a directory.
    pub const EISDIR: Errno = Errno(21);
    /// Invalid argument.
    pub const EINVAL: Errno = Errno(22);
    /// Too many open files.
    pub const EMFILE: Errno = Errno(24);
    /// Inappropriate ioctl for device.
    pub const ENOTTY: Errno = Errno(25);
    /// No space left (KFD: event slots exhausted).
    pub const ENOSPC: Errno = Errno(28);
    /// Timer expired.
    pub const ETIME: Errno = Errno(62);
    /// Address already in use.
    pub const EADDRINUSE: Errno = Errno(98);
    /// Kernel-internal "operation not supported" (`ENOTSUPP`, 524), which amdkfd returns for an
    /// unknown queue type.
    pub const ENOTSUPP: Errno = Errno(524);

    /// The raw number.
    pub const fn raw(self) -> i32 {
        self.0
    }

    fn name(self) -> Option<&'static str> {
        Some(match self {
            Errno::EPERM => "EPERM",
            Errno::ENOENT => "ENOENT",
            Errno::ESRCH => "ESRCH",
            Errno::EIO => "EIO",
            Errno::EBADF => "EBADF",
            Errno::EAGAIN => "EAGAIN",
            Errno::ENOMEM => "ENOMEM",
            Errno::EACCES => "EACCES",
            Errno::EFAULT => "EFAULT",
            Errno::EBUSY => "EBUSY",
            Errno::EEXIST => "EEXIST",
            Errno::ENODEV => "ENODEV",
            Errno::ENOTDIR => "ENOTDIR",
            Errno::EISDIR => "EISDIR",
            Errno::EINVAL => "EINVAL",
            Errno::EMFILE => "EMFILE",
            Errno::ENOTTY => "ENOTTY",
            Errno::ENOSPC => "ENOSPC",
            Errno::ETIME => "ETIME",
            Errno::EADDRINUSE => "EADDRINUSE",
            Errno::ENOTSUPP => "ENOTSUPP",
            _ => return None,
        })
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "Errno({})", self.0),
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?} ({})", self.0)
    }
}

impl std::error::Error for Errno {}

/// Result of an emulated syscall.
pub type SysResult<T> = Result<T, Errno>;
