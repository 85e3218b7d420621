//! The library's errors. Only what stops a query is an error; what merely hides some data
//! (a process that could not be read, a protocol the kernel lacks) is a [`crate::Warning`].

use std::fmt;

/// A query that could not be answered.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A sock_diag dump failed and no fallback was allowed (`Source::Netlink`).
    Dump {
        /// Which dump (`tcp4`, `unix`, ...).
        what: String,
        /// Why.
        message: String,
    },
    /// `-z` named a zone that does not exist.
    UnknownZone {
        /// What was asked for.
        name: String,
        /// The zones that do exist.
        known: Vec<String>,
    },
    /// `/proc` could not be read at all.
    Proc {
        /// Why.
        message: String,
    },
    /// The query asks for something that cannot be done (a protocol list without TCP for a
    /// TCP-only view).
    Query(crate::query::FilterError),
}

impl From<crate::query::FilterError> for Error {
    fn from(e: crate::query::FilterError) -> Error {
        Error::Query(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Dump { what, message } => {
                write!(f, "sock_diag dump of {what} failed: {message}")
            }
            Error::Proc { message } => f.write_str(message),
            Error::Query(e) => write!(f, "{e}"),
            Error::UnknownZone { name, known } => write!(
                f,
                "unknown zone '{name}': give a zone name, container id prefix or namespace inode (known: {})",
                known.join(", ")
            ),
        }
    }
}

impl std::error::Error for Error {}
