//! `ports()`, `counters()` and `diagnose()`: the views that read the namespace's counters and
//! sysctls and may sample twice over an interval, through the library's `Sampler` (and
//! `diagnose_connections`) for the network namespace this process runs in, as the command does
//! without `-z`/`-Z`. Every call of those entry points stays in this file.

use std::path::PathBuf;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use serde::Serialize;

use sockstat::counters::{deltas, since_boot, CounterRow};
use sockstat::ports::analyze_zone;
use sockstat::{Proto, Query, Sample, Sampler, ZoneSample};

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

/// One sample, or two `wait` apart (the wait counted from the first sample's start).
fn samples(
    sampler: &Sampler,
    wait: Option<Duration>,
) -> Result<(Option<Sample>, Sample), sockstat::Error> {
    match wait {
        None => Ok((None, sampler.sample()?)),
        Some(d) => {
            let a = sampler.sample()?;
            std::thread::sleep(d.saturating_sub(a.taken.elapsed()));
            let b = sampler.sample()?;
            Ok((Some(a), b))
        }
    }
}

/// The zone this process runs in (the one zone of a sample without zones).
fn own_zone(s: &Sample) -> PyResult<&ZoneSample> {
    s.zones
        .first()
        .ok_or_else(|| os_error(format!("nothing could be read: {}", reasons(s))))
}

fn reasons(s: &Sample) -> String {
    let why: Vec<String> = s
        .warnings
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
    filter.sport = asked.sport;
    filter.dport = asked.dport;
    filter.src = asked.src;
    filter.dst = asked.dst;

    let sampler = Sampler::new(&gather).sysctls(true).counters(wait.is_some());
    let (first, last) = py.detach(|| samples(&sampler, wait)).map_err(error)?;
    let interval_s = first.as_ref().map(|f| last.seconds_since(f));
    let now = own_zone(&last)?;
    let before = first.as_ref().and_then(|f| f.matching(now));
    let report = analyze_zone(now, before, interval_s, Some(&filter));
    let doc = document(
        py,
        "PortsReport",
        &sockstat::render::ports::report_object(&report, &last.warnings),
    )?;
    PyTuple::new(
        py,
        [doc.into_any(), warnings(py, &last.warnings)?.into_any()],
    )
}

/// The `sockstat counters --json` document.
#[derive(Serialize)]
struct CountersDocument<'a, W: Serialize> {
    interval_s: Option<f64>,
    counters: &'a [CounterRow],
    hidden_zero: usize,
    warnings: Vec<W>,
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
        q.proc_root = root;
    }
    let sampler = Sampler::new(&q).sockets(false).sysctls(false);
    let (first, last) = py.detach(|| samples(&sampler, wait)).map_err(error)?;
    let now = own_zone(&last)?;
    let unreadable = || os_error(format!("cannot read the counters: {}", reasons(&last)));
    let set = now.counters.as_ref().ok_or_else(unreadable)?;
    let mut report = match &first {
        None => since_boot(set, all),
        Some(f) => {
            let earlier = f
                .matching(now)
                .and_then(|z| z.counters.as_ref())
                .ok_or_else(unreadable)?;
            deltas(earlier, set, last.seconds_since(f), all)
        }
    };
    report.warnings.extend(last.warnings.iter().cloned());
    report.warnings.dedup();
    let doc = CountersDocument {
        interval_s: report.interval_s,
        counters: &report.counters,
        hidden_zero: report.hidden_zero,
        warnings: report
            .warnings
            .iter()
            .map(|w| sockstat::render::json::warning_object(w, true))
            .collect(),
    };
    document(py, "CountersReport", &doc)
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
    document(py, "DiagnoseReport", &doc)
}

/// Parses a bandwidth as `--bandwidth` does (`100Mbit`, `12.5MB/s`): bytes per second.
#[pyfunction]
pub fn parse_bandwidth(text: &str) -> PyResult<f64> {
    sockstat::diagnose::parse_bandwidth(text).map_err(PyValueError::new_err)
}
