//! Python objects from the library's serde views, without JSON text in between.
//!
//! Every JSON object of sockstat's documents becomes a `sockstat.Record` (a `dict` whose keys
//! also read as attributes) or one of its documented subclasses, chosen by the name of the Rust
//! struct that serializes it; arrays become lists, numbers ints or floats, `null` `None`. A field
//! a view leaves out (`skip_serializing_if`) is absent here too, so a Record compares equal to
//! the command's JSON object for the same socket.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyMapping, PyString, PyType};
use pythonize::{PythonizeMappingType, PythonizeNamedMappingType, PythonizeTypes};
use serde::Serialize;

/// Rust struct names (the library's views) and the `sockstat._records` class each becomes.
/// A struct not listed becomes a plain `Record`; `tests/test_records.py` checks that the
/// listing's objects get their classes, so a renamed struct is noticed.
const CLASSES: &[(&str, &str)] = &[
    ("JsonSocket", "Socket"),
    ("JsonEndpoint", "Endpoint"),
    ("JsonOwner", "Owner"),
    ("JsonTimer", "Timer"),
    ("JsonCgroup", "Cgroup"),
    ("JsonWarning", "WarningRecord"),
    ("Warning", "WarningRecord"),
    ("Zone", "Zone"),
    ("Memory", "Memory"),
    ("ListeningPort", "ListeningPort"),
    ("PortsReport", "PortsReport"),
    ("Destination", "Destination"),
    ("Server", "Server"),
    ("CounterReport", "CountersReport"),
    ("CounterRow", "Counter"),
    ("DiagnoseDocument", "DiagnoseReport"),
];

struct Classes {
    record: Py<PyType>,
    named: Vec<(&'static str, Py<PyType>)>,
}

static CLASS_CACHE: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASS_CACHE.get_or_try_init(py, || {
        let m = py.import("sockstat._records")?;
        let get = |name: &str| -> PyResult<Py<PyType>> {
            Ok(m.getattr(name)?.cast_into::<PyType>()?.unbind())
        };
        let mut named = Vec::with_capacity(CLASSES.len());
        for &(rust, python) in CLASSES {
            named.push((rust, get(python)?));
        }
        Ok(Classes {
            record: get("Record")?,
            named,
        })
    })
}

fn new_record<'py>(py: Python<'py>, name: Option<&str>) -> PyResult<Bound<'py, PyDict>> {
    let c = classes(py)?;
    let class = name
        .and_then(|n| c.named.iter().find(|(rust, _)| *rust == n))
        .map_or(&c.record, |(_, class)| class);
    Ok(class.bind(py).call0()?.cast_into::<PyDict>()?)
}

/// The mapping type: `Record` for maps, the class of [`CLASSES`] for structs.
struct RecordMap;

impl PythonizeMappingType for RecordMap {
    type Builder<'py> = Bound<'py, PyDict>;

    fn builder<'py>(py: Python<'py>, _len: Option<usize>) -> PyResult<Self::Builder<'py>> {
        new_record(py, None)
    }

    fn push_item<'py>(
        builder: &mut Self::Builder<'py>,
        key: Bound<'py, PyAny>,
        value: Bound<'py, PyAny>,
    ) -> PyResult<()> {
        builder.set_item(key, value)
    }

    fn finish<'py>(builder: Self::Builder<'py>) -> PyResult<Bound<'py, PyMapping>> {
        Ok(builder.into_mapping())
    }
}

impl PythonizeNamedMappingType for RecordMap {
    type Builder<'py> = Bound<'py, PyDict>;

    fn builder<'py>(
        py: Python<'py>,
        _len: usize,
        name: &'static str,
    ) -> PyResult<Self::Builder<'py>> {
        new_record(py, Some(name))
    }

    fn push_field<'py>(
        builder: &mut Self::Builder<'py>,
        name: Bound<'py, PyString>,
        value: Bound<'py, PyAny>,
    ) -> PyResult<()> {
        builder.set_item(name, value)
    }

    fn finish<'py>(builder: Self::Builder<'py>) -> PyResult<Bound<'py, PyMapping>> {
        Ok(builder.into_mapping())
    }
}

struct Types;

impl PythonizeTypes for Types {
    type Map = RecordMap;
    type NamedMap = RecordMap;
    type List = PyList;
}

/// Pauses Python's cyclic garbage collector while many objects are built, and resumes it (if
/// it was running) when dropped. What is built holds no reference cycles, so nothing is lost;
/// without the pause the collector's passes over the growing result took over half the time of
/// a 57,000-row `net_connections()` (0.45 s against 0.20 s).
pub struct GcPause<'py> {
    gc: Bound<'py, PyModule>,
    resume: bool,
}

impl<'py> GcPause<'py> {
    pub fn new(py: Python<'py>) -> PyResult<GcPause<'py>> {
        let gc = py.import("gc")?;
        let resume = gc.call_method0("isenabled")?.is_truthy()?;
        if resume {
            gc.call_method0("disable")?;
        }
        Ok(GcPause { gc, resume })
    }
}

impl Drop for GcPause<'_> {
    fn drop(&mut self) {
        if self.resume {
            if let Err(e) = self.gc.call_method0("enable") {
                e.write_unraisable(self.gc.py(), None);
            }
        }
    }
}

/// `value` as Python objects (Records, lists, ints, floats, strings, `None`).
pub fn to_py<'py>(py: Python<'py>, value: &impl Serialize) -> PyResult<Bound<'py, PyAny>> {
    Ok(pythonize::pythonize_custom::<Types, _>(py, value)?)
}

/// A document (`ports`, `counters`, `diagnose`): `value` as its Record, `"version": 1` first,
/// as the command's JSON begins.
pub fn document<'py>(py: Python<'py>, value: &impl Serialize) -> PyResult<Bound<'py, PyDict>> {
    let body = to_py(py, value)?.cast_into::<PyDict>()?;
    let doc = body.get_type().call0()?.cast_into::<PyDict>()?;
    doc.set_item("version", 1)?;
    doc.update(body.as_mapping())?;
    Ok(doc)
}

/// The gathering warnings as the documents' `warnings` arrays hold them, details included (the
/// command's `-v`).
pub fn warnings<'py>(
    py: Python<'py>,
    warnings: &[sockstat::Warning],
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for w in warnings {
        list.append(to_py(py, &sockstat::render::json::warning_object(w, true))?)?;
    }
    Ok(list)
}
