//! `sockstat._native`: the sockstat library for Python. The package's public functions
//! (`sockstat/__init__.py`) check and normalize their keyword arguments and call these; this
//! crate gathers with the GIL released and turns the library's model into Python objects.
//!
//! - [`sockets`] and [`listening_ports`]: the listing, as the JSON contract's objects
//!   ([`objects`]).
//! - [`connections::net_connections`]: psutil's rows, built straight from the model.
//! - [`sampled`]: `ports`, `counters`, `diagnose` (the entry points that sample over time).

mod connections;
mod objects;
mod query;
mod sampled;

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use query::{error, Details, Filters};

/// The listing's sockets as `sockstat.Socket` objects, and the gathering's warnings:
/// `(sockets, warnings)`.
#[pyfunction]
fn sockets<'py>(
    py: Python<'py>,
    filters: Filters,
    details: Details,
) -> PyResult<Bound<'py, PyTuple>> {
    let mut q = filters.query()?;
    q.gather.args = details.args;
    q.gather.resolve_users = details.resolve_users;
    q.gather.tcp_info = details.tcp_info;
    q.gather.congestion = details.congestion;
    q.gather.memory = details.memory;
    q.gather.cgroups = details.cgroup;
    // As the command: with TCP internals, TIME-WAIT entries (which have none) are left out, a
    // warning counting them, unless asked for (`--time-wait`, or a state filter).
    q.select.hide_time_wait = details.tcp_info && !details.time_wait && q.select.states.is_none();
    let snap = py.detach(|| sockstat::collect(&q)).map_err(error)?;
    let mut opts = sockstat::render::Options::new();
    opts.args = details.args;
    opts.tcp = details.tcp_info;
    opts.congestion = details.congestion;
    opts.memory = details.memory;
    opts.cgroup = details.cgroup;
    opts.verbose = true;
    let _gc = objects::GcPause::new(py)?;
    let b = objects::Builder::new(py)?;
    let objects = sockstat::render::json::SocketObjects::new(&snap, &opts);
    let items = snap
        .sockets
        .iter()
        .map(|s| b.build(&objects.object(s)))
        .collect::<PyResult<Vec<_>>>()?;
    let list = PyList::new(py, items)?;
    PyTuple::new(
        py,
        [
            list.into_any(),
            objects::warnings(py, &snap.warnings)?.into_any(),
        ],
    )
}

/// Every listening inet socket with its holders (`sockstat::ListeningPort`), and the
/// gathering's warnings: `(ports, warnings)`.
#[pyfunction]
fn listening_ports(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    let snap = py
        .detach(|| sockstat::collect(&sockstat::ListeningPort::query()))
        .map_err(error)?;
    let ports = sockstat::ListeningPort::from_snapshot(&snap);
    let _gc = objects::GcPause::new(py)?;
    PyTuple::new(
        py,
        [
            objects::Builder::new(py)?.build(&ports)?,
            objects::warnings(py, &snap.warnings)?.into_any(),
        ],
    )
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(sockets, m)?)?;
    m.add_function(wrap_pyfunction!(listening_ports, m)?)?;
    m.add_function(wrap_pyfunction!(connections::net_connections, m)?)?;
    m.add_function(wrap_pyfunction!(sampled::ports, m)?)?;
    m.add_function(wrap_pyfunction!(sampled::counters, m)?)?;
    m.add_function(wrap_pyfunction!(sampled::diagnose, m)?)?;
    m.add_function(wrap_pyfunction!(sampled::parse_bandwidth, m)?)?;
    Ok(())
}
