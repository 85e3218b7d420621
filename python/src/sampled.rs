//! `ports()`, `counters()` and `diagnose()`: the views that read the namespace's counters and
//! sysctls and may sample twice over an interval, through the library's use cases
//! (`sockstat::run::{ports, counters, diagnose}`, the ones the command calls) for the network
//! namespace this process runs in, as the command does without `-z`/`-Z`.

use std::path::PathBuf;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use sockstat::{Diagnosis, Query};

use crate::objects::{document, warnings};
use crate::query::{error, os_error, Filters};

/// The longest interval accepted, seconds (a day), as the command's `SECONDS`.
const MAX_INTERVAL_S: f64 = 86_400.0;

/// An interval as the command accepts it, with its message for a bad one.
fn interval(s: f64) -> PyResult<Duration> {
    if s.is_finite() && s > 0.0 && s <= MAX_INTERVAL_S {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(PyValueError::new_err(format!(
            "invalid interval '{s}': give seconds greater than 0 and at most 86400, like 10 or 0.5"
        )))
    }
}

/// What the warnings say went wrong: each one's details, or its message when it has none.
fn reasons(warnings: &[sockstat::Warning]) -> String {
    let why: Vec<String> = warnings
        .iter()
        .flat_map(|w| {
            if w.details.is_empty() {
                vec![w.message.clone()]
            } else {
                w.details.clone()
            }
        })
        .collect();
    why.join("; ")
}

/// `sockstat ports --json` (`-4 -6 -L -p --sport --dport --src --dst --interval`) as a `PortsReport`, and
/// the gathering's own warnings (which the report also holds, as findings):
/// `(report, warnings)`.
#[pyfunction]
#[pyo3(signature = (filters, interval_s=None))]
pub fn ports<'py>(
    py: Python<'py>,
    filters: Filters,
    interval_s: Option<f64>,
) -> PyResult<Bound<'py, PyTuple>> {
    let asked = filters.query()?;
    let wait = interval_s.map(interval).transpose()?;
    let found = py
        .detach(|| sockstat::run::ports::run(&asked, wait))
        .map_err(error)?;
    // The zone this process runs in: the one report of a sample without zones.
    let report = found.reports.first().ok_or_else(|| {
        os_error(format!(
            "nothing could be read: {}",
            reasons(&found.warnings)
        ))
    })?;
    let doc = document(
        py,
        "PortsReport",
        &sockstat::render::ports::report_object(report, &found.warnings),
    )?;
    PyTuple::new(
        py,
        [doc.into_any(), warnings(py, &found.warnings)?.into_any()],
    )
}

/// `sockstat counters [SECONDS] [--all] --json` as a `CountersReport`; `proc_root` (tests, as
/// the command's hidden `--proc-root`) reads the counter files from another directory.
#[pyfunction]
#[pyo3(signature = (interval_s=None, all=false, proc_root=None))]
pub fn counters(
    py: Python<'_>,
    interval_s: Option<f64>,
    all: bool,
    proc_root: Option<PathBuf>,
) -> PyResult<Bound<'_, PyDict>> {
    let wait = interval_s.map(interval).transpose()?;
    let mut q = Query::new();
    if let Some(root) = proc_root {
        q.gather.proc_root = root;
    }
    let report = py
        .detach(|| sockstat::run::counters::run(&q, wait, all))
        .map_err(error)?;
    let doc = sockstat::render::counters::document(&report, true);
    document(py, "CountersReport", &doc)
}

/// `sockstat diagnose --json` (the listing's filters, `--interval`, `--bandwidth`) as a
/// `DiagnoseReport`. `bandwidth` is in bytes per second.
#[pyfunction]
#[pyo3(signature = (filters, interval_s, bandwidth=None))]
pub fn diagnose<'py>(
    py: Python<'py>,
    filters: Filters,
    interval_s: f64,
    bandwidth: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let q = filters.query()?;
    let wait = interval(interval_s)?;
    let report = py
        .detach(|| {
            // As the command: connect latencies traced over the interval where allowed.
            let mut how = Diagnosis::default();
            how.bandwidth = bandwidth;
            how.connect_events = true;
            sockstat::run::diagnose::run(&q, wait, &how)
        })
        .map_err(error)?;
    let doc = sockstat::render::diagnose::document(&report, true);
    document(py, "DiagnoseReport", &doc)
}

/// Parses a bandwidth as `--bandwidth` does (`100Mbit`, `12.5MB/s`): bytes per second.
#[pyfunction]
pub fn parse_bandwidth(text: &str) -> PyResult<f64> {
    sockstat::diagnose::parse_bandwidth(text).map_err(PyValueError::new_err)
}
