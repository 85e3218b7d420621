//! `sockstat serve`: a Prometheus exporter. `GET /metrics` answers in the text exposition format
//! (`sockstat::render::metrics`) from a fresh collection of the namespace sockstat runs in, or,
//! with `-Z`, of every zone (network namespace) on the host, each labelled with its zone.
//!
//! The HTTP layer (TLS, authentication, methods) is `crate::http`; this file answers its
//! requests. One worker thread collects, so collections never overlap; scrapes arriving together
//! (one thread per connection) wait for the same collection. A scrape waits for it at most
//! `--scrape-budget`; past it, the scrape is answered from the last collection with its age
//! (`sockstat_snapshot_age_seconds`) while the worker finishes, and the next scrape gets the
//! result. The collection itself, with what the next one reuses (the previous sample, the owner
//! cache of the listeners), is the library's `sockstat::run::exporter`. doc/serve.md describes
//! every metric.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sockstat::render::metrics::ZoneMetrics;
use sockstat::render::metrics::{self, MetricsInput, SelfMetrics};
use sockstat::run::drops::DropCounter;
use sockstat::run::events::{Tracer, Unavailable};
use sockstat::run::exporter::Collector;
use sockstat::{OwnerScan, Zone, ZoneKind, ZoneSelect};

use crate::http::{BindError, Method, Request, Response, Server};
use crate::privileges;
use rustix::thread::CapabilitySet;

/// Parses `--scrape-budget`: `5s`, `500ms`, or plain seconds (`2.5`).
fn parse_budget(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let secs = if let Some(ms) = t.strip_suffix("ms") {
        ms.trim().parse::<f64>().ok().map(|v| v / 1e3)
    } else {
        t.strip_suffix('s').unwrap_or(t).trim().parse::<f64>().ok()
    };
    match secs {
        Some(v) if v.is_finite() && v > 0.0 && v <= 3600.0 => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!(
            "invalid scrape budget '{s}': give a duration above 0 and at most 3600s, like 5s, 500ms or 2.5"
        )),
    }
}

/// Flags of `sockstat serve`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = concat!("\
Metrics (doc/serve.md): sockstat_sockets, sockstat_listen_queue, sockstat_listen_backlog,
sockstat_ephemeral_ports_used, sockstat_ephemeral_ports_usage_ratio,
sockstat_ephemeral_ports_usable, sockstat_ephemeral_destinations, sockstat_findings,
sockstat_kernel_trouble_total, sockstat_listeners_command_unknown, sockstat_up,
sockstat_scrape_duration_seconds, sockstat_snapshot_age_seconds,
sockstat_collect_duration_seconds, sockstat_scrape_budget_exceeded_total,
sockstat_owner_scans_total, sockstat_zones. sockstat_findings needs two collections: the first
scrape has none. Every per-zone family has a zone label (global on the host); with -Z, every
zone on the host is exported, each zone besides its own with a bounded set of series
(doc/serve.md, Cardinality). With --events: sockstat_connect_latency_seconds,
sockstat_accept_wait_seconds (histograms by port), sockstat_connections_total,
sockstat_connect_failures_total, sockstat_connection_closes_total, sockstat_events_lost_total,
sockstat_drops_total, sockstat_drops_uncounted_total. GET and HEAD are answered; other methods
get 405.

Privileges: it keeps CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE (to name the processes holding
listeners), and CAP_SYS_ADMIN with -Z (to enter other namespaces), in its collection thread
only, and drops every other capability once it listens; the threads that accept connections and
parse requests hold none. With file capabilities, the web configuration is read with the
caller's own rights.

Clients: at most 64 connections, 8 per client address; 10 s from connect to a complete request
(TLS handshake included), 30 s to take the answer; one password check at a time, others answered
429 (doc/serve.md, Connections).

Examples:
  sockstat serve                             http://127.0.0.1:9277/metrics
  sockstat serve -Z                          every container and namespace, labelled by zone
  sockstat serve --listen 0.0.0.0:9277       every interface (metrics name processes: firewall it)
  sockstat serve --top 50 --scrape-budget 10s
  sockstat serve --events                    also connect latency, accept wait and drops (root)
  sockstat serve --web.config.file /etc/sockstat/web.yml   TLS and passwords (doc/serve.md)

It runs until stopped (SIGTERM or Ctrl-C: status 0). Status 2: a bad flag or web configuration
file; 3: --events without CAP_BPF and CAP_PERFMON, or a port below 1024 without
CAP_NET_BIND_SERVICE; 4: it cannot listen (the port is in use).
", crate::cli::exit_statuses!()))]
pub struct ServeArgs {
    /// Address and port to serve /metrics on. Loopback by default: the metrics name processes,
    /// addresses and ports.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9277")]
    pub listen: SocketAddr,
    /// Every zone (network namespace) on the host, as `sockstat -Z` finds and names them, each
    /// read inside it: every per-zone metric gets that zone's label. Needs CAP_SYS_ADMIN.
    #[arg(short = 'Z', overrides_with = "all_zones")]
    pub all_zones: bool,
    /// Destinations the ephemeral-port metrics show, over all zones, highest share of the port
    /// range first (bounds their label cardinality).
    #[arg(long, value_name = "N", default_value_t = metrics::DEFAULT_TOP)]
    pub top: usize,
    /// Longest a scrape waits for a fresh collection; past it, the last collection is served
    /// with its age (sockstat_snapshot_age_seconds).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_budget)]
    pub scrape_budget: Duration,
    /// The Prometheus exporter toolkit's web configuration file (as node_exporter's): TLS,
    /// client certificates, basic-auth users with bcrypt hashes, extra headers, a rate limit.
    /// Checked at start; read again when it or a file it names changes.
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,
    /// Also export connection events (as `sockstat events` traces them) and dropped packets:
    /// connect-latency and accept-wait histograms by port (the first 32 ports, the rest as
    /// port="other"), connections by side, failures by reason, closes by how they ended, events
    /// lost, and drops by reason and protocol. Needs CAP_BPF and CAP_PERFMON (or root) at start;
    /// the programs stay attached after the capabilities are dropped.
    #[arg(long)]
    pub events: bool,
    /// Read /proc from this directory (testing).
    #[arg(long, value_name = "DIR", hide = true)]
    pub proc_root: Option<PathBuf>,
    /// Print help.
    #[arg(short = 'h', long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// What the worker keeps between collections: the library's collector (doc/architecture.md,
/// "Use cases"), and what the exposition and the log need besides.
struct Worker {
    collector: Collector,
    /// The zone sockstat runs in.
    own: Zone,
    top: usize,
    /// The codes of the warnings last logged: a warning is logged when it appears, not at
    /// every scrape.
    logged: Vec<sockstat::WarningCode>,
}

/// One collection, rendered.
struct Collected {
    body: Vec<u8>,
    finished: Instant,
    duration: Duration,
    zones: usize,
}

impl Worker {
    fn collect(&mut self) -> anyhow::Result<Collected> {
        let start = Instant::now();
        let (own, top, logged) = (&self.own, self.top, &mut self.logged);
        let rendered = self.collector.collect(|c| {
            // What the collection could not read (counters, sysctls, zones it may not enter,
            // the holders of listeners) leaves metrics out: say so in the log when it starts,
            // not at every scrape.
            let codes: Vec<sockstat::WarningCode> = c.warnings.iter().map(|w| w.code).collect();
            if codes != *logged {
                for w in c.warnings.iter().filter(|w| !logged.contains(&w.code)) {
                    eprintln!("sockstat: warning: {}", w.message);
                }
                *logged = codes;
            }
            let zones: Vec<ZoneMetrics<'_>> = c
                .sample
                .zones
                .iter()
                .zip(c.ports)
                .map(|(z, r)| ZoneMetrics {
                    sample: z,
                    ports: Some(r),
                })
                .collect();
            let mut body = Vec::with_capacity(64 * 1024);
            metrics::write_snapshot(
                &MetricsInput {
                    zones: &zones,
                    own,
                    top,
                    findings: c.findings,
                    events: c.events.map(|(m, d)| (m, Some(d))),
                },
                &mut body,
            )
            .map(|()| (body, c.sample.zones.len()))
        })?;
        let (body, zones) = rendered?;
        Ok(Collected {
            body,
            finished: Instant::now(),
            duration: start.elapsed(),
            zones,
        })
    }
}

/// The namespace sockstat runs in, as `-Z` would name it (`global` on the host).
fn own_zone(proc_root: &std::path::Path) -> Zone {
    sockstat::current_zone(proc_root).unwrap_or_else(|| Zone::new("global", ZoneKind::Global))
}

#[derive(Default)]
struct State0 {
    last: Option<Arc<Collected>>,
    last_error: Option<String>,
    generation: u64,
    in_flight: bool,
    budget_exceeded: u64,
    owner_scans: u64,
}

struct Shared {
    state: Mutex<State0>,
    done: Condvar,
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State0> {
    shared.state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `sockstat serve` until the process is stopped.
pub fn run(a: &ServeArgs) -> anyhow::Result<ExitCode> {
    let all_zones = a.all_zones;
    let proc_root = a
        .proc_root
        .clone()
        .unwrap_or_else(|| PathBuf::from("/proc"));
    // Connection events: the programs are loaded and attached first (while the capabilities
    // to do so are still there; reading them afterwards needs none), so that everything after
    // the "serving" line is counted.
    let events = if a.events {
        Some(start_events().map_err(|u| crate::explained(format!("--events: {u}"), u))?)
    } else {
        None
    };
    let server = Server::bind(a.listen, a.web_config_file.as_deref()).map_err(|e| match e {
        BindError::WebConfig(why) => crate::usage(why),
        listen => anyhow::Error::new(listen),
    })?;
    let bound = server.local_addr().unwrap_or(a.listen);
    eprintln!(
        "sockstat: serving metrics on {}://{bound}/metrics",
        server.scheme()
    );
    for note in server.notes() {
        eprintln!("sockstat: note: {note}");
    }
    if !a.listen.ip().is_loopback() && !server.authenticates() {
        eprintln!(
            "sockstat: warning: {} is reachable from other hosts; the metrics name processes, \
             addresses and ports: restrict it with a firewall, or require a password or a client \
             certificate (--web.config.file)",
            a.listen
        );
    }
    // Listening and the web configuration (certificate files included) are done: keep only
    // what naming owners (and, with -Z, entering namespaces) takes, before any thread starts
    // (capabilities are per thread).
    let want = if all_zones {
        privileges::EXPORTER_ZONES
    } else {
        privileges::EXPORTER
    };
    let kept = privileges::keep_only(want).context("dropping capabilities")?;
    let missing_owners = kept.missing & privileges::EXPORTER;
    if !missing_owners.is_empty() {
        eprintln!(
            "sockstat: warning: without {}, listeners held by other users' processes are \
             labelled command=\"?\" (give it those capabilities or run it as root; doc/serve.md)",
            privileges::names(missing_owners).join(" and ")
        );
    }
    if !(kept.missing - privileges::EXPORTER).is_empty() {
        eprintln!(
            "sockstat: warning: without CAP_SYS_ADMIN, -Z cannot enter other namespaces: each is \
             read from a process's /proc/PID/net text instead (no TCP internals there, so no \
             findings, and no sysctls), and namespaces with no visible process are left out \
             (give it CAP_SYS_ADMIN or run it as root; doc/serve.md)"
        );
    }
    // The BPF owner scan needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); without them, ask
    // for the /proc scan rather than have every scan try the iterator first and fall back
    // quietly. With them, ask for the iterator (fewer system calls per scan on a big host),
    // and give it up for good the first time it cannot run.
    let owner_scan = if kept.effective.contains(privileges::BPF_SCAN)
        || kept.effective.contains(CapabilitySet::SYS_ADMIN)
    {
        OwnerScan::Bpf
    } else {
        OwnerScan::Proc
    };

    let shared = Arc::new(Shared {
        state: Mutex::new(State0::default()),
        done: Condvar::new(),
    });
    let (tx, rx) = mpsc::channel::<()>();
    let zones = if all_zones {
        ZoneSelect::All
    } else {
        ZoneSelect::Current
    };
    let mut collector = Collector::new(proc_root.clone(), zones, owner_scan);
    if let Some((tracer, drops)) = events {
        let metrics = sockstat::run::exporter::sum_events(tracer, all_zones, || {
            // Reading the ring buffer takes no privilege: this thread holds none.
            let _ = privileges::keep_in_this_thread(CapabilitySet::empty());
        })
        .context("starting the events thread")?;
        collector = collector.with_events(metrics, drops);
    }
    let mut collector = Worker {
        collector,
        own: own_zone(&proc_root),
        top: a.top,
        logged: Vec::new(),
    };
    let worker_shared = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("collect".into())
        .spawn(move || {
            for () in rx {
                // A bug met on odd data costs this scrape (up 0), not the exporter: the next
                // scrape collects again.
                let result =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| collector.collect()))
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("the collection panicked")));
                let mut st = lock(&worker_shared);
                match result {
                    Ok(c) => {
                        if st.last_error.is_some() {
                            eprintln!("sockstat: collecting again");
                        }
                        st.last = Some(Arc::new(c));
                        st.last_error = None;
                    }
                    Err(e) => {
                        // Logged when it starts failing, or fails differently: not at every
                        // scrape of a failure that persists.
                        let e = format!("{e:#}");
                        if st.last_error.as_ref() != Some(&e) {
                            eprintln!("sockstat: collection failed: {e}");
                        }
                        st.last_error = Some(e);
                    }
                }
                st.owner_scans = collector.collector.owner_scans();
                st.generation += 1;
                st.in_flight = false;
                worker_shared.done.notify_all();
            }
        })
        .context("starting the collection thread")?;

    let budget = a.scrape_budget;
    let handler = move |req: &Request<'_>| -> Response {
        match (req.path, req.method) {
            ("/metrics", Method::Get) => {
                Response::ok(metrics::CONTENT_TYPE, scrape(&shared, &tx, budget))
            }
            // A HEAD probes that the exporter answers; it does not start a collection.
            ("/metrics", Method::Head) => Response::head_only(metrics::CONTENT_TYPE),
            ("/", Method::Get | Method::Head) => Response::ok(
                "text/plain; charset=utf-8",
                b"sockstat exporter: metrics at /metrics\n".to_vec(),
            ),
            ("/metrics" | "/", Method::Other) => Response::method_not_allowed("GET, HEAD"),
            _ => Response::not_found(),
        }
    };
    server.run(Arc::new(handler)).context("serving HTTP")?;
    Ok(ExitCode::SUCCESS)
}

/// Loads the connection-event and drop programs; the error names what is missing.
fn start_events() -> Result<(Tracer, DropCounter), Unavailable> {
    let tracer = Tracer::start(false, sockstat::run::events::RING_BYTES)?;
    if let Some(why) = &tracer.accept_unavailable {
        eprintln!("sockstat: warning: accept() is not traced ({why}): no accept-wait histograms");
    }
    let drops = DropCounter::start()?;
    Ok((tracer, drops))
}

/// One scrape: starts a collection unless one is running, waits for it within the budget, and
/// answers with it, or with the last one and its age.
fn scrape(shared: &Shared, tx: &mpsc::Sender<()>, budget: Duration) -> Vec<u8> {
    let start = Instant::now();
    let mut st = lock(shared);
    let gen0 = st.generation;
    if !st.in_flight {
        if tx.send(()).is_ok() {
            st.in_flight = true;
        } else {
            st.last_error = Some("the collection thread has stopped".into());
            st.last = None;
        }
    }
    let (mut st, timeout) = shared
        .done
        .wait_timeout_while(st, budget, |s| s.generation == gen0)
        .unwrap_or_else(|p| p.into_inner());
    let fresh = !timeout.timed_out();
    if !fresh {
        st.budget_exceeded += 1;
    }
    // A failed fresh collection reports up 0 with no data; a late one serves the last data.
    let served = if fresh && st.last_error.is_some() {
        None
    } else {
        st.last.clone()
    };
    let mut body = Vec::new();
    if let Some(c) = &served {
        body.extend_from_slice(&c.body);
    }
    let m = SelfMetrics {
        up: served.is_some(),
        scrape_duration_s: start.elapsed().as_secs_f64(),
        snapshot_age_s: served
            .as_ref()
            .map_or(0.0, |c| c.finished.elapsed().as_secs_f64()),
        collect_duration_s: served.as_ref().map_or(0.0, |c| c.duration.as_secs_f64()),
        budget_exceeded_total: st.budget_exceeded,
        owner_scans_total: st.owner_scans,
        zones: served.as_ref().map_or(0, |c| c.zones),
    };
    drop(st);
    let _ = metrics::write_self(&m, &mut body);
    let _ = body.flush();
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_in_seconds_and_milliseconds() {
        assert_eq!(parse_budget("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_budget("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_budget("2.5"), Ok(Duration::from_millis(2500)));
        for bad in ["0", "0s", "-1s", "abc", "5m", "3601s"] {
            let e = parse_budget(bad).unwrap_err();
            assert!(e.contains(&format!("'{bad}'")), "{e}");
        }
    }
}
