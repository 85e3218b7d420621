//! The one error type of this crate.
//!
//! Every decoder returns [`DecodeError`] instead of panicking: the input comes from the kernel
//! (possibly a newer or older one than we know) or from a file a user pointed us at, and the
//! caller decides whether one bad record aborts a dump or is skipped with a warning.

use std::fmt;

/// Why a buffer or a line could not be decoded.
///
/// `what` always names the structure being decoded in the kernel's words (e.g.
/// `"nlmsghdr"`, `"inet_diag_msg"`, `"/proc/net/tcp line"`), so the message alone says where
/// the problem was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The input ended before a fixed-size structure did.
    Truncated {
        /// The structure that was cut short.
        what: &'static str,
        /// Bytes (or fields, for text formats) the structure needs.
        need: usize,
        /// Bytes (or fields) that were available.
        have: usize,
    },
    /// The input is long enough but a field is inconsistent (a length that points outside the
    /// buffer, a non-hex digit, ...).
    Malformed {
        /// The structure being decoded.
        what: &'static str,
        /// Byte offset (binary formats) or byte column (text formats) where the problem was found.
        offset: usize,
        /// What is wrong, in a few words.
        reason: &'static str,
    },
    /// A `/proc/net/snmp`-style header line and its value line disagree on the number of
    /// columns, so names cannot be paired with values.
    CountMismatch {
        /// The group prefix (`"Tcp"`, `"TcpExt"`, ...).
        group: String,
        /// Number of names in the header line.
        names: usize,
        /// Number of values in the value line.
        values: usize,
    },
}

impl DecodeError {
    pub(crate) fn truncated(what: &'static str, need: usize, have: usize) -> Self {
        DecodeError::Truncated { what, need, have }
    }

    pub(crate) fn malformed(what: &'static str, offset: usize, reason: &'static str) -> Self {
        DecodeError::Malformed {
            what,
            offset,
            reason,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { what, need, have } => {
                write!(f, "truncated {what}: need {need}, have {have}")
            }
            DecodeError::Malformed {
                what,
                offset,
                reason,
            } => write!(f, "malformed {what} at offset {offset}: {reason}"),
            DecodeError::CountMismatch {
                group,
                names,
                values,
            } => write!(
                f,
                "counter group {group:?}: {names} names but {values} values"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}
