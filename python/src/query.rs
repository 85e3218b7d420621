//! The Python keyword arguments as a [`Query`], parsed by the library's own parsers so that a
//! bad value gets the command's message, and the library's errors as the Python exceptions a
//! caller expects.

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use sockstat::query::{
    parse_pids, parse_prefix, parse_protos, parse_states, CommandMatch, ConnectedTo,
};
use sockstat::{ErrorKind, FilterError, OwnerScan, PortSet, Query, Source, ZoneSelect};

/// The filters, as `sockstat/__init__.py` passes them: a dict with every key, lists already
/// joined into the command line's comma-separated form.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Filters {
    families: Option<Vec<String>>,
    protos: Option<String>,
    connected: bool,
    listening: bool,
    no_loopback: bool,
    ports: Option<String>,
    sport: Option<String>,
    dport: Option<String>,
    src: Option<String>,
    dst: Option<String>,
    states: Option<String>,
    pids: Option<String>,
    user: Option<String>,
    command: Option<String>,
    connected_to: Option<String>,
    owners: bool,
    zone: Option<String>,
    all_zones: bool,
    source: String,
    owner_scan: String,
}

/// What to gather beyond the listing's columns (`sockets()` only).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Details {
    pub args: bool,
    pub resolve_users: bool,
    pub tcp_info: bool,
    pub congestion: bool,
    pub memory: bool,
    pub cgroup: bool,
    pub time_wait: bool,
}

fn bad(message: String) -> PyErr {
    PyValueError::new_err(FilterError::from_message(message).to_string())
}

fn filter<T>(r: Result<T, FilterError>) -> PyResult<T> {
    r.map_err(|e| PyValueError::new_err(e.to_string()))
}

impl Filters {
    /// The query these filters describe (what `sockstat`'s flags of the same names build).
    pub fn query(&self) -> PyResult<Query> {
        let mut q = Query::new();
        if let Some(fams) = &self.families {
            q.select.families.inet = false;
            q.select.families.inet6 = false;
            q.select.families.unix = false;
            for f in fams {
                match f.as_str() {
                    "inet" => q.select.families.inet = true,
                    "inet6" => q.select.families.inet6 = true,
                    "unix" => q.select.families.unix = true,
                    other => {
                        return Err(bad(format!(
                            "unknown family '{other}': choose from inet, inet6, unix"
                        )))
                    }
                }
            }
            if fams.is_empty() {
                return Err(bad(
                    "empty family list: give inet, inet6 or unix, or None for all three".into(),
                ));
            }
        }
        q.select.protos = filter(self.protos.as_deref().map(parse_protos).transpose())?;
        q.select.connected = self.connected;
        q.select.listening = self.listening;
        q.select.no_loopback = self.no_loopback;
        q.select.ports = filter(self.ports.as_deref().map(PortSet::parse).transpose())?;
        q.select.sport = filter(self.sport.as_deref().map(PortSet::parse).transpose())?;
        q.select.dport = filter(self.dport.as_deref().map(PortSet::parse).transpose())?;
        q.select.src = filter(self.src.as_deref().map(parse_prefix).transpose())?;
        q.select.dst = filter(self.dst.as_deref().map(parse_prefix).transpose())?;
        q.select.states = filter(self.states.as_deref().map(parse_states).transpose())?;
        q.select.pids = filter(self.pids.as_deref().map(parse_pids).transpose())?;
        q.select.uid = filter(self.user.as_deref().map(sockstat::resolve_user).transpose())?;
        q.select.command = filter(self.command.as_deref().map(CommandMatch::parse).transpose())?;
        q.select.connected_to = filter(
            self.connected_to
                .as_deref()
                .map(ConnectedTo::parse)
                .transpose(),
        )?;
        q.gather.owners = self.owners;
        if !q.gather.owners && (q.select.pids.is_some() || q.select.command.is_some()) {
            return Err(bad(
                "pids and command need the owner scan; drop owners=False".into(),
            ));
        }
        q.select.zones = match (&self.zone, self.all_zones) {
            (Some(z), _) => ZoneSelect::Named(z.clone()),
            (None, true) => ZoneSelect::All,
            (None, false) => ZoneSelect::Current,
        };
        q.gather.source = match self.source.as_str() {
            "auto" => Source::Auto,
            "netlink" => Source::Netlink,
            "proc" => Source::Proc,
            other => {
                return Err(bad(format!(
                    "unknown source '{other}': choose from auto, netlink, proc"
                )))
            }
        };
        q.gather.owner_scan = match self.owner_scan.as_str() {
            "auto" => OwnerScan::Auto,
            "proc" => OwnerScan::Proc,
            "bpf" => OwnerScan::Bpf,
            other => {
                return Err(bad(format!(
                    "unknown owner scan '{other}': choose from auto, proc, bpf"
                )))
            }
        };
        Ok(q)
    }
}

/// A library error as the Python exception a caller expects, by its kind: bad input (a filter
/// value, an unknown zone) is a `ValueError` with the command's message; a failed read an
/// `OSError` with its errno, so that Python makes it the matching subclass (`PermissionError`
/// for a denied one, `FileNotFoundError`, ...); a bug in sockstat a `RuntimeError`.
pub fn error(e: sockstat::Error) -> PyErr {
    let errno = match &e {
        sockstat::Error::Proc(s) => s.errno(),
        sockstat::Error::Dump { source, .. } => source.errno(),
        _ => None,
    };
    let message = e.to_string();
    match e.kind() {
        ErrorKind::Invalid => PyValueError::new_err(message),
        ErrorKind::Bug => PyRuntimeError::new_err(message),
        kind => {
            let errno = errno.or(match kind {
                ErrorKind::Denied => Some(libc::EACCES),
                ErrorKind::Gone => Some(libc::ENOENT),
                _ => None,
            });
            match errno {
                Some(n) => PyOSError::new_err((n, message)),
                None => os_error(message),
            }
        }
    }
}

/// `OSError(errno, message)` when `message` ends an `std::io::Error` text (`... (os error 13)`),
/// which Python turns into the matching subclass; a plain `OSError(message)` otherwise. For
/// failures the library reports as warnings (text) rather than errors, such as counter files
/// that could not be read.
pub fn os_error(message: String) -> PyErr {
    let errno = message
        .rfind("(os error ")
        .and_then(|i| message[i + 10..].split(')').next())
        .and_then(|n| n.parse::<i32>().ok());
    match errno {
        Some(n) => PyOSError::new_err((n, message)),
        None => PyOSError::new_err(message),
    }
}
