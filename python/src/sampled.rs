//! `ports()`, `counters()` and `diagnose()`: the views that read the namespace's counters and
//! sysctls and may sample twice over an interval. They assemble today's library entry points
//! (`sockstat::ports::analyze` with the `sys::` readers, `sockstat::counters`,
//! `sockstat::diagnose_connections`) for the namespace this process runs in, as the command
//! does without `-z`/`-Z`; every such call stays in this file, which follows the library when
//! those entry points become one sampler.

use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use serde::Serialize;

use sockstat::counters::{CounterReport, CounterSet};
use sockstat::ports::{analyze, finding_from_warning, PortsInput};
use sockstat::sys::counters::ProcPaths;
use sockstat::{Proto, Query, Snapshot};

use crate::objects::{document, warnings};
use crate::query::{error, Filters};

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

struct PortsSample {
    snap: Snapshot,
    counters: Option<CounterSet>,
}

fn ports_sample(
    q: &Query,
    paths: &ProcPaths,
    counters: bool,
) -> Result<PortsSample, sockstat::Error> {
    let snap = sockstat::collect(q)?;
    let counters = if counters {
        Some(sockstat::sys::counters::read(paths)?.set)
    } else {
        None
    };
    Ok(PortsSample { snap, counters })
}

/// `sockstat ports --json` (`-4 -6 -L -p --src --dst --interval`) as a `PortsReport`, and
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
    // What is gathered: every TCP socket of the families, listeners too (the server view
    // needs them), no owner scan (TIME-WAIT entries have no owner).
    let mut gather = Query::new();
    gather.families.inet = asked.families.inet;
    gather.families.inet6 = asked.families.inet6;
    gather.families.unix = false;
    gather.protos = Some(vec![Proto::Tcp]);
    gather.owners = false;
    gather.resolve_users = false;
    // What is reported.
    let mut filter = gather.clone();
    filter.no_loopback = asked.no_loopback;
    filter.ports = asked.ports;
    filter.src = asked.src;
    filter.dst = asked.dst;

    let paths = ProcPaths::new(&gather.proc_root);
    let report = py
        .detach(|| -> Result<_, sockstat::Error> {
            let (first, last, interval_s) = match wait {
                None => (None, ports_sample(&gather, &paths, false)?, None),
                Some(d) => {
                    let start = Instant::now();
                    let a = ports_sample(&gather, &paths, true)?;
                    std::thread::sleep(d);
                    let b = ports_sample(&gather, &paths, true)?;
                    (Some(a), b, Some(start.elapsed().as_secs_f64()))
                }
            };
            let sysctls = sockstat::sys::sysctl::read_port_sysctls(&paths);
            let time_wait_total = sockstat::sys::counters::read_time_wait_total(&paths);
            let counters = match (&first, &last.counters) {
                (
                    Some(PortsSample {
                        counters: Some(a), ..
                    }),
                    Some(b),
                ) => Some((a, b)),
                _ => None,
            };
            let mut report = analyze(&PortsInput {
                snapshot: &last.snap,
                earlier: first.as_ref().map(|s| &s.snap),
                interval_s,
                sysctls: &sysctls,
                counters,
                time_wait_total,
                filter: Some(&filter),
            });
            report
                .warnings
                .extend(last.snap.warnings.iter().map(finding_from_warning));
            Ok((report, last.snap.warnings))
        })
        .map_err(error)?;
    PyTuple::new(
        py,
        [
            document(py, &report.0)?.into_any(),
            warnings(py, &report.1)?.into_any(),
        ],
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
    proc_root: Option<std::path::PathBuf>,
) -> PyResult<Bound<'_, PyDict>> {
    let wait = interval_s.map(interval).transpose()?;
    let root = proc_root.unwrap_or_else(|| std::path::PathBuf::from("/proc"));
    let paths = ProcPaths::new(&root);
    let report = py
        .detach(|| -> Result<CounterReport, sockstat::Error> {
            let first = sockstat::sys::counters::read(&paths)?;
            let mut r = match wait {
                None => {
                    let mut r = sockstat::counters::since_boot(&first.set, all);
                    r.warnings.extend(first.warnings);
                    r
                }
                Some(d) => {
                    let start = Instant::now();
                    std::thread::sleep(d);
                    let second = sockstat::sys::counters::read(&paths)?;
                    let elapsed = start.elapsed().as_secs_f64();
                    let mut r = sockstat::counters::deltas(&first.set, &second.set, elapsed, all);
                    r.warnings.extend(second.warnings);
                    r
                }
            };
            r.warnings.dedup();
            Ok(r)
        })
        .map_err(error)?;
    document(py, &report)
}

/// The `sockstat diagnose --json` document.
#[derive(Serialize)]
struct DiagnoseDocument<W: Serialize> {
    interval_s: f64,
    connections: usize,
    findings: Vec<serde_json::Value>,
    warnings: Vec<W>,
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
        .detach(|| sockstat::diagnose_connections(&q, wait, bandwidth))
        .map_err(error)?;
    let doc = DiagnoseDocument {
        interval_s: report.interval_s,
        connections: report.connections,
        findings: report
            .findings
            .iter()
            .map(sockstat::render::diagnose::finding_json)
            .collect(),
        warnings: report
            .warnings
            .iter()
            .map(|w| sockstat::render::json::warning_object(w, true))
            .collect(),
    };
    document(py, &doc)
}

/// Parses a bandwidth as `--bandwidth` does (`100Mbit`, `12.5MB/s`): bytes per second.
#[pyfunction]
pub fn parse_bandwidth(text: &str) -> PyResult<f64> {
    sockstat::diagnose::parse_bandwidth(text).map_err(PyValueError::new_err)
}
