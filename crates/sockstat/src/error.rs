//! The library's errors. Only what stops a query is an [`Error`]; what merely hides some data
//! (a process that could not be read, a protocol the kernel lacks) is a [`crate::Warning`].
//!
//! Every error keeps its cause ([`std::error::Error::source`], with the errno where there is
//! one) and says what kind of failure it is ([`ErrorKind`]): a thing that is gone (normal under
//! churn), a lack of privilege, something this kernel or build does not offer, bad input, or
//! anything else.

use std::fmt;
use std::io;

/// What kind of failure an error is, for callers that act on it (retry, ask for privileges,
/// fall back, report a bug).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// What was asked about is gone: a process that exited, a socket that closed, a namespace
    /// that was removed (`ENOENT`, `ESRCH`). Normal on a busy host.
    Gone,
    /// Not permitted with these privileges (`EACCES`, `EPERM`).
    Denied,
    /// This kernel or build does not offer it (`ENOSYS`, `EOPNOTSUPP`, a missing module or
    /// feature).
    Unsupported,
    /// The input is not valid: a flag, a filter, a zone name, a file's contents.
    Invalid,
    /// A bug in sockstat (a thread that panicked, a state that cannot happen): report it.
    Bug,
    /// Anything else: an I/O failure such as too many open files or no memory.
    Other,
}

impl ErrorKind {
    /// The kind of an I/O error, by its errno.
    pub fn of_io(e: &io::Error) -> ErrorKind {
        match e.raw_os_error() {
            Some(libc::ENOENT | libc::ESRCH) => ErrorKind::Gone,
            Some(libc::EACCES | libc::EPERM) => ErrorKind::Denied,
            Some(libc::ENOSYS | libc::EOPNOTSUPP | libc::EPROTONOSUPPORT | libc::EAFNOSUPPORT) => {
                ErrorKind::Unsupported
            }
            Some(_) => ErrorKind::Other,
            None => match e.kind() {
                io::ErrorKind::NotFound => ErrorKind::Gone,
                io::ErrorKind::PermissionDenied => ErrorKind::Denied,
                io::ErrorKind::Unsupported => ErrorKind::Unsupported,
                io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput => ErrorKind::Invalid,
                _ => ErrorKind::Other,
            },
        }
    }
}

/// A system call or read that failed: what it was doing, and the error (with its errno).
#[derive(Debug)]
#[non_exhaustive]
pub struct SysError {
    /// What was being done, in words: `"cannot open /proc"`, `"bpf(BPF_PROG_LOAD)"`.
    pub what: String,
    /// The cause.
    pub source: io::Error,
    bug: bool,
}

impl SysError {
    /// `what` failed with `source`.
    pub fn new(what: impl Into<String>, source: impl Into<io::Error>) -> SysError {
        SysError {
            what: what.into(),
            source: source.into(),
            bug: false,
        }
    }

    /// A failure with no system error behind it (a missing feature, a malformed file):
    /// `kind` says which.
    pub fn other(what: impl Into<String>, kind: ErrorKind, why: impl Into<String>) -> SysError {
        let io_kind = match kind {
            ErrorKind::Gone => io::ErrorKind::NotFound,
            ErrorKind::Denied => io::ErrorKind::PermissionDenied,
            ErrorKind::Unsupported => io::ErrorKind::Unsupported,
            ErrorKind::Invalid => io::ErrorKind::InvalidData,
            ErrorKind::Bug | ErrorKind::Other => io::ErrorKind::Other,
        };
        SysError {
            what: what.into(),
            source: io::Error::new(io_kind, why.into()),
            bug: kind == ErrorKind::Bug,
        }
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> ErrorKind {
        if self.bug {
            return ErrorKind::Bug;
        }
        ErrorKind::of_io(&self.source)
    }

    /// The errno, when the cause was a system call.
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

impl fmt::Display for SysError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.source)
    }
}

impl std::error::Error for SysError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl From<rustix::io::Errno> for ErrorKind {
    fn from(e: rustix::io::Errno) -> ErrorKind {
        ErrorKind::of_io(&io::Error::from(e))
    }
}

/// How a dump failed.
#[derive(Debug)]
pub enum DumpError {
    /// The socket could not be opened, or send/recv failed (errno inside).
    Io(std::io::Error),
    /// The kernel answered with an error: `NLMSG_ERROR`, or the errno inside `NLMSG_DONE`
    /// (ENOENT there means "no handler for this protocol": the diag module is missing).
    Kernel(i32),
    /// A reply could not be decoded.
    Decode(sockstat_wire::DecodeError),
}

impl std::fmt::Display for DumpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DumpError::Io(e) => write!(f, "{e}"),
            DumpError::Kernel(errno) => {
                write!(f, "{}", std::io::Error::from_raw_os_error(*errno))
            }
            DumpError::Decode(e) => write!(f, "undecodable sock_diag reply: {e}"),
        }
    }
}

impl std::error::Error for DumpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DumpError::Io(e) => Some(e),
            DumpError::Kernel(_) => None,
            DumpError::Decode(e) => Some(e),
        }
    }
}

impl DumpError {
    /// The errno, when the failure has one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            DumpError::Io(e) => e.raw_os_error(),
            DumpError::Kernel(e) => Some(*e),
            DumpError::Decode(_) => None,
        }
    }
}

/// A query that could not be answered.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A sock_diag dump failed and no fallback was allowed (`Source::Netlink`).
    Dump {
        /// Which dump (`tcp4`, `unix`, ...).
        what: String,
        /// Why (the kernel's errno, or the decoding failure).
        source: DumpError,
    },
    /// `-z` named a zone that does not exist.
    UnknownZone {
        /// What was asked for.
        name: String,
        /// The zones that do exist.
        known: Vec<String>,
    },
    /// A file under `/proc` (or the `--proc-root` given) could not be read, or was not what
    /// the kernel writes.
    Proc(SysError),
    /// The query asks for something that cannot be done (a protocol list without TCP for a
    /// TCP-only view).
    Query(crate::query::FilterError),
    /// Nothing of what a report needs could be read (no zone's counter files, say): there is
    /// nothing to show.
    Unreadable {
        /// What could not be read (`the counters`).
        what: String,
        /// Why: what the gathering's warnings said.
        why: String,
    },
}

impl Error {
    /// What kind of failure it is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Dump { source, .. } => match source.errno() {
                Some(n) => ErrorKind::of_io(&io::Error::from_raw_os_error(n)),
                None => ErrorKind::Other,
            },
            Error::UnknownZone { .. } | Error::Query(_) => ErrorKind::Invalid,
            Error::Proc(e) => e.kind(),
            Error::Unreadable { .. } => ErrorKind::Other,
        }
    }

    /// A `/proc` read that failed.
    pub(crate) fn proc(path: &std::path::Path, source: impl Into<io::Error>) -> Error {
        Error::Proc(SysError::new(
            format!("cannot read {}", path.display()),
            source,
        ))
    }
}

impl From<crate::query::FilterError> for Error {
    fn from(e: crate::query::FilterError) -> Error {
        Error::Query(e)
    }
}

impl From<SysError> for Error {
    fn from(e: SysError) -> Error {
        Error::Proc(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Dump { what, source } => {
                write!(f, "sock_diag dump of {what} failed: {source}")
            }
            Error::Proc(e) => write!(f, "{e}"),
            Error::Query(e) => write!(f, "{e}"),
            Error::Unreadable { what, why } => write!(f, "cannot read {what}: {why}"),
            Error::UnknownZone { name, known } => write!(
                f,
                "unknown zone '{name}': give a zone name, container id prefix or namespace inode (known: {})",
                known.join(", ")
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Dump { source, .. } => Some(source),
            Error::Proc(e) => Some(e),
            Error::Query(e) => Some(e),
            Error::UnknownZone { .. } | Error::Unreadable { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_errno() {
        let e = |n| ErrorKind::of_io(&io::Error::from_raw_os_error(n));
        assert_eq!(e(libc::ENOENT), ErrorKind::Gone);
        assert_eq!(e(libc::ESRCH), ErrorKind::Gone);
        assert_eq!(e(libc::EACCES), ErrorKind::Denied);
        assert_eq!(e(libc::EPERM), ErrorKind::Denied);
        assert_eq!(e(libc::ENOSYS), ErrorKind::Unsupported);
        assert_eq!(e(libc::EMFILE), ErrorKind::Other);
        assert_eq!(e(libc::ENOMEM), ErrorKind::Other);
        let s = SysError::new("cannot open /proc/1/fd", io::Error::from_raw_os_error(13));
        assert_eq!(s.kind(), ErrorKind::Denied);
        assert_eq!(s.errno(), Some(13));
        assert!(std::error::Error::source(&s).is_some());
        let err = Error::from(s);
        assert_eq!(err.kind(), ErrorKind::Denied);
        assert!(
            err.to_string().starts_with("cannot open /proc/1/fd: "),
            "{err}"
        );
        let o = SysError::other("BTF", ErrorKind::Unsupported, "no /sys/kernel/btf/vmlinux");
        assert_eq!(o.kind(), ErrorKind::Unsupported);
        assert_eq!(o.to_string(), "BTF: no /sys/kernel/btf/vmlinux");
        let b = SysError::other("the owner scan", ErrorKind::Bug, "a thread panicked");
        assert_eq!(b.kind(), ErrorKind::Bug);
    }
}
