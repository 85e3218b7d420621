//! `net_connections()`: psutil's `sconn` rows, built straight from the snapshot (the listing's
//! model), one per (socket, holder). psutil's shape is kept where it is not a limitation of
//! psutil's method; `python/README.md` lists the differences.

use std::collections::HashMap;
use std::net::IpAddr;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyString, PyTuple, PyType};

use sockstat::{Endpoint, Family, Proto, Query, SockType, State, UnixName};

use crate::query::error;

/// Python objects every row reuses, looked up once.
struct Consts {
    sconn: Py<PyType>,
    addr: Py<PyType>,
    tuple_new: Py<PyAny>,
    af_inet: Py<PyAny>,
    af_inet6: Py<PyAny>,
    af_unix: Py<PyAny>,
    sock_stream: Py<PyAny>,
    sock_dgram: Py<PyAny>,
    sock_seqpacket: Py<PyAny>,
    sock_raw: Py<PyAny>,
    /// psutil's status constants, by [`status_index`].
    statuses: Vec<Py<PyString>>,
    empty_tuple: Py<PyTuple>,
    empty_str: Py<PyString>,
    minus_one: Py<PyAny>,
}

/// psutil's `CONN_*` strings, in [`status_index`] order.
const STATUSES: [&str; 12] = [
    "ESTABLISHED",
    "SYN_SENT",
    "SYN_RECV",
    "FIN_WAIT1",
    "FIN_WAIT2",
    "TIME_WAIT",
    "CLOSE",
    "CLOSE_WAIT",
    "LAST_ACK",
    "LISTEN",
    "CLOSING",
    "NONE",
];

/// psutil reports a state for TCP only; every other socket, and a state psutil has no
/// constant for, is `NONE`.
fn status_index(proto: Proto, state: State) -> usize {
    if proto != Proto::Tcp {
        return 11;
    }
    match state {
        State::Established => 0,
        State::SynSent => 1,
        State::SynRecv => 2,
        State::FinWait1 => 3,
        State::FinWait2 => 4,
        State::TimeWait => 5,
        State::Close => 6,
        State::CloseWait => 7,
        State::LastAck => 8,
        State::Listen => 9,
        State::Closing => 10,
        // UNCONN, a state this version does not know, one no table told, and any a later
        // library adds.
        _ => 11,
    }
}

static CONSTS: PyOnceLock<Consts> = PyOnceLock::new();

fn consts(py: Python<'_>) -> PyResult<&Consts> {
    CONSTS.get_or_try_init(py, || {
        let records = py.import("sockstat._records")?;
        let socket = py.import("socket")?;
        let s = |name: &str| -> PyResult<Py<PyAny>> { Ok(socket.getattr(name)?.unbind()) };
        Ok(Consts {
            sconn: records.getattr("sconn")?.cast_into::<PyType>()?.unbind(),
            addr: records.getattr("addr")?.cast_into::<PyType>()?.unbind(),
            tuple_new: py.get_type::<PyTuple>().getattr("__new__")?.unbind(),
            af_inet: s("AF_INET")?,
            af_inet6: s("AF_INET6")?,
            af_unix: s("AF_UNIX")?,
            sock_stream: s("SOCK_STREAM")?,
            sock_dgram: s("SOCK_DGRAM")?,
            sock_seqpacket: s("SOCK_SEQPACKET")?,
            sock_raw: s("SOCK_RAW")?,
            statuses: STATUSES
                .iter()
                .map(|n| PyString::intern(py, n).unbind())
                .collect(),
            empty_tuple: PyTuple::empty(py).unbind(),
            empty_str: PyString::intern(py, "").unbind(),
            minus_one: (-1i32).into_pyobject(py)?.into_any().unbind(),
        })
    })
}

/// A unix socket name as `/proc/net/unix` shows it (where psutil reads it): the path, or `@`
/// and the abstract name with each NUL shown as `@`; decoded as `os.fsdecode` would.
fn unix_name<'py>(py: Python<'py>, name: &UnixName) -> PyResult<Bound<'py, PyAny>> {
    let bytes: Vec<u8> = match name {
        UnixName::Path(p) => p.as_bytes().to_vec(),
        UnixName::Abstract(a) => std::iter::once(b'@')
            .chain(a.as_bytes().iter().map(|&b| if b == 0 { b'@' } else { b }))
            .collect(),
    };
    fsdecode(py, &bytes)
}

fn fsdecode<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(PyString::new(py, s).into_any()),
        Err(_) => py
            .import("os")?
            .getattr("fsdecode")?
            .call1((pyo3::types::PyBytes::new(py, bytes),)),
    }
}

/// Builds rows; caches address strings and unix names (many sockets share one: a listener's
/// accepted sockets carry its path).
struct Rows<'a, 'py> {
    py: Python<'py>,
    c: &'a Consts,
    ips: HashMap<IpAddr, Bound<'py, PyString>>,
    names: HashMap<&'a UnixName, Bound<'py, PyAny>>,
}

impl<'a, 'py> Rows<'a, 'py> {
    /// An instance of a named tuple class, untracked by the cyclic garbage collector: it holds
    /// only ints, strings, `socket` enum members and other such tuples, so it can never be part
    /// of a reference cycle (CPython untracks plain tuples of that kind itself), and 100,000 rows
    /// then cost later collections nothing.
    fn namedtuple(
        &self,
        class: &Py<PyType>,
        items: Bound<'py, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let t = self
            .c
            .tuple_new
            .bind(self.py)
            .call1((class.bind(self.py), items))?;
        // SAFETY: `t` is a live, GC-tracked tuple subclass instance that we own; untracking an
        // object that cannot take part in a cycle is what the API is for.
        unsafe { pyo3::ffi::PyObject_GC_UnTrack(t.as_ptr().cast()) };
        Ok(t)
    }

    fn inet(&mut self, ep: Option<&Endpoint>) -> PyResult<Bound<'py, PyAny>> {
        let Some(Endpoint::Inet { addr, port }) = ep else {
            return Ok(self.c.empty_tuple.bind(self.py).clone().into_any());
        };
        // psutil: port 0 (unbound, or no remote end) is an empty tuple, not an address.
        if *port == 0 {
            return Ok(self.c.empty_tuple.bind(self.py).clone().into_any());
        }
        let py = self.py;
        let ip = self
            .ips
            .entry(*addr)
            .or_insert_with(|| PyString::new(py, &addr.to_string()))
            .clone();
        let items = PyTuple::new(py, [ip.into_any(), port.into_pyobject(py)?.into_any()])?;
        self.namedtuple(&self.c.addr, items)
    }

    fn unix(&mut self, name: Option<&'a UnixName>) -> PyResult<Bound<'py, PyAny>> {
        let Some(name) = name else {
            return Ok(self.c.empty_str.bind(self.py).clone().into_any());
        };
        if let Some(v) = self.names.get(name) {
            return Ok(v.clone());
        }
        let v = unix_name(self.py, name)?;
        self.names.insert(name, v.clone());
        Ok(v)
    }

    fn unix_local(&mut self, ep: &'a Endpoint) -> PyResult<Bound<'py, PyAny>> {
        match ep {
            Endpoint::Unix(name) => self.unix(name.as_ref()),
            _ => self.unix(None),
        }
    }

    fn unix_remote(&mut self, ep: Option<&'a Endpoint>) -> PyResult<Bound<'py, PyAny>> {
        match ep {
            Some(Endpoint::UnixPeer { name, .. }) => self.unix(name.as_ref()),
            _ => self.unix(None),
        }
    }
}

/// psutil's `net_connections()` rows for the sockets of the given families and protocols, and
/// the gathering's warnings: `(rows, warnings)`.
#[pyfunction]
#[pyo3(signature = (*, inet, inet6, unix, tcp, udp))]
pub fn net_connections(
    py: Python<'_>,
    inet: bool,
    inet6: bool,
    unix: bool,
    tcp: bool,
    udp: bool,
) -> PyResult<Bound<'_, PyTuple>> {
    let mut q = Query::new();
    q.select.families.inet = inet;
    q.select.families.inet6 = inet6;
    q.select.families.unix = unix;
    let mut protos = Vec::new();
    if tcp {
        protos.push(Proto::Tcp);
    }
    if udp {
        protos.push(Proto::Udp);
    }
    if unix {
        protos.push(Proto::Unix);
    }
    q.select.protos = Some(protos);
    // psutil's rows are the tables': a socket never bound is in none.
    q.gather.unlisted = false;
    q.gather.resolve_users = false;
    let snap = py.detach(|| sockstat::collect(&q)).map_err(error)?;

    let c = consts(py)?;
    let _gc = crate::objects::GcPause::new(py)?;
    let mut rows = Rows {
        py,
        c,
        ips: HashMap::new(),
        names: HashMap::new(),
    };
    let list = PyList::empty(py);
    for s in &snap.sockets {
        let family = match s.family {
            Family::Inet => &c.af_inet,
            Family::Inet6 => &c.af_inet6,
            Family::Unix => &c.af_unix,
            // Packet, netlink and other families: not in psutil's kinds (and not asked for:
            // the protocols above).
            _ => continue,
        }
        .bind(py);
        let sock_type = match s.sock_type {
            SockType::Stream => &c.sock_stream,
            SockType::Dgram => &c.sock_dgram,
            SockType::Seqpacket => &c.sock_seqpacket,
            SockType::Raw => &c.sock_raw,
            _ => continue,
        }
        .bind(py);
        let (laddr, raddr) = if s.family == Family::Unix {
            (
                rows.unix_local(&s.local)?,
                rows.unix_remote(s.remote.as_ref())?,
            )
        } else {
            (rows.inet(Some(&s.local))?, rows.inet(s.remote.as_ref())?)
        };
        let status = c.statuses[status_index(s.proto, s.state)].bind(py);
        let row = |fd: Bound<'_, PyAny>, pid: Bound<'_, PyAny>| -> PyResult<()> {
            let items = PyTuple::new(
                py,
                [
                    fd,
                    family.clone(),
                    sock_type.clone(),
                    laddr.clone(),
                    raddr.clone(),
                    status.clone().into_any(),
                    pid,
                ],
            )?;
            list.append(rows.namedtuple(&c.sconn, items)?)
        };
        if s.owners.is_empty() {
            row(c.minus_one.bind(py).clone(), py.None().into_bound(py))?;
        }
        for o in &s.owners {
            row(
                o.fd.into_pyobject(py)?.into_any(),
                o.pid.into_pyobject(py)?.into_any(),
            )?;
        }
    }
    PyTuple::new(
        py,
        [
            list.into_any(),
            crate::objects::warnings(py, &snap.warnings)?.into_any(),
        ],
    )
}
