//! `sockstat serve`: a Prometheus exporter. `GET /metrics` answers in the text exposition format
//! (`sockstat::render::metrics`) from a fresh collection of the namespace sockstat runs in, or,
//! with `-Z`, of every zone (network namespace) on the host, each labelled with its zone.
//!
//! The HTTP layer (TLS, authentication, methods) is `crate::http`; this file answers its
//! requests. One worker thread collects, so collections never overlap; scrapes arriving together
//! (one thread per connection) wait for the same collection. A scrape waits for it at most
//! `--scrape-budget`; past it, the scrape is answered from the last collection with its age
//! (`sockstat_snapshot_age_seconds`) while the worker finishes, and the next scrape gets the
//! result. The worker keeps what the next collection reuses: the previous sample (diagnosis
//! needs two) and an owner cache ((zone, socket inode) → holders) for the listening sockets, the
//! only sockets whose owners the metrics show, so the /proc scan (one for every zone: it reads
//! every process's fds) runs only when a listener appears that the cache does not know (or the
//! cache is older than [`OWNER_REFRESH`]). doc/serve.md describes every metric.

use std::collections::HashMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sockstat::events::metrics::EventMetrics;
use sockstat::events::ConnEvent;
use sockstat::render::metrics::ZoneMetrics;
use sockstat::render::metrics::{self, MetricsInput, SelfMetrics};
use sockstat::run::drops::DropCounter;
use sockstat::run::events::{Tracer, Unavailable};
use sockstat::{
    judge, Diagnosis, Endpoint, Owner, OwnerScan, OwnersStatus, Process, Proto, Query, Sample,
    Sampler, State, Zone, ZoneKind, ZoneSample, ZoneSelect,
};

use crate::http::{BindError, Method, Request, Response, Server};
use crate::privileges;
use rustix::thread::CapabilitySet;

/// The owner cache is refreshed at least this often, so a listener handed to another process
/// (or whose holder exited while a child kept it) gets its `command` label corrected.
pub const OWNER_REFRESH: Duration = Duration::from_secs(300);

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

/// Owners of the listening sockets, by zone key and socket inode, with the processes they
/// name. One /proc scan serves every zone: it reads the fds of every process on the host.
struct OwnerCache {
    by_listener: HashMap<(Option<u64>, u64), Vec<Owner>>,
    processes: HashMap<u32, Process>,
    /// What the last scan could not see: a listener's owner status is decided from it, as the
    /// listing decides it (`sockstat::join`).
    unseen: sockstat::join::Unseen,
    /// The last scan failed as a whole.
    scan_failed: bool,
    refreshed: Option<Instant>,
    scans: u64,
    /// How the scan reads fd tables: the BPF iterator when the capabilities kept allow it
    /// (CAP_SYS_ADMIN, kept with -Z, or CAP_BPF and CAP_PERFMON), until it fails once (a
    /// system-call filter, an old kernel); else `/proc`, so that the iterator is not tried and
    /// given up at every scan.
    scan: OwnerScan,
}

fn listener_inode(s: &sockstat::Socket) -> Option<u64> {
    (s.state == State::Listen && matches!(s.local, Endpoint::Inet { .. }))
        .then_some(s.id)
        .flatten()
}

impl OwnerCache {
    fn new(scan: OwnerScan) -> OwnerCache {
        OwnerCache {
            by_listener: HashMap::new(),
            processes: HashMap::new(),
            unseen: sockstat::join::Unseen::default(),
            scan_failed: false,
            refreshed: None,
            scans: 0,
            scan,
        }
    }

    /// Gives the listeners of every zone their holders and owner status: from the cache when
    /// every listener is known to it and it is fresh, else from one full owner scan that refills
    /// it. Returns what the metrics cannot show of them: the scan failed or could not use the
    /// BPF iterator, or processes that could not be read may hold listeners (the listing's
    /// `owners-hidden`, counted over the listeners, the sockets whose holders the metrics name).
    fn fill(
        &mut self,
        zones: &mut [ZoneSample],
        proc_root: &std::path::Path,
    ) -> Vec<sockstat::Warning> {
        let listeners: Vec<(Option<u64>, u64)> = zones
            .iter()
            .flat_map(|z| {
                z.snapshot
                    .sockets
                    .iter()
                    .filter_map(listener_inode)
                    .map(move |i| (z.key, i))
            })
            .collect();
        let stale = self.refreshed.is_none_or(|t| t.elapsed() >= OWNER_REFRESH);
        let mut warnings = Vec::new();
        if stale || listeners.iter().any(|l| !self.by_listener.contains_key(l)) {
            self.scans += 1;
            self.refreshed = Some(Instant::now());
            let mut q = Query::new();
            q.proc_root = proc_root.to_path_buf();
            q.owner_scan = self.scan;
            match sockstat::scan_owners(&q) {
                Ok(scan) => {
                    if let Some(why) = scan.bpf_unavailable {
                        // Say it once, and scan /proc from now on without trying again.
                        warnings.push(sockstat::Warning::new(
                            sockstat::WarningCode::OwnerScanBpfUnavailable,
                            format!(
                                "the BPF owner scan cannot run here ({why}); scanning /proc \
                                 instead"
                            ),
                        ));
                        self.scan = OwnerScan::Proc;
                    }
                    self.unseen = scan.unseen;
                    self.scan_failed = false;
                    self.by_listener = listeners
                        .iter()
                        .map(|&(zone, id)| {
                            let holders = scan.index.holders_of(id);
                            ((zone, id), holders.iter().map(|x| x.owner).collect())
                        })
                        .collect();
                    let mut procs = scan.processes;
                    self.processes = self
                        .by_listener
                        .values()
                        .flatten()
                        .filter_map(|o| Some((o.pid, procs.remove(&o.pid)?)))
                        .collect();
                }
                Err(e) => {
                    // Remember the listeners anyway: a failing scan is retried at the refresh.
                    self.by_listener = listeners.iter().map(|&l| (l, Vec::new())).collect();
                    self.processes.clear();
                    self.scan_failed = true;
                    warnings.push(sockstat::Warning::new(
                        sockstat::WarningCode::OwnersUnavailable,
                        format!("no process information for listeners: {e}"),
                    ));
                }
            }
        } else {
            // Forget listeners that closed (and zones that went away), so the cache stays as
            // small as the listener set.
            let live: std::collections::HashSet<(Option<u64>, u64)> =
                listeners.iter().copied().collect();
            self.by_listener.retain(|l, _| live.contains(l));
        }
        let mut shown: Vec<sockstat::Socket> = Vec::new();
        for z in zones {
            let snap = &mut z.snapshot;
            for s in &mut snap.sockets {
                let owners = listener_inode(s).and_then(|i| self.by_listener.get(&(z.key, i)));
                if let Some(owners) = owners {
                    s.owners = owners.clone();
                    s.owners_status = if self.failed() {
                        OwnersStatus::Hidden
                    } else {
                        sockstat::join::status_of(s, &self.unseen, &self.processes)
                    };
                    for o in owners {
                        if let Some(p) = self.processes.get(&o.pid) {
                            snap.processes.entry(o.pid).or_insert_with(|| p.clone());
                        }
                    }
                    shown.push(s.clone());
                }
            }
        }
        if !self.failed() {
            warnings.extend(sockstat::join::warnings(
                &shown,
                &self.unseen,
                sockstat::privilege::reads_every_fd_table(),
            ));
        }
        warnings
    }

    /// Whether the last scan failed as a whole (its listeners then have no holder, and may
    /// have any).
    fn failed(&self) -> bool {
        self.scan_failed
    }
}

/// What the worker keeps between collections.
struct Collector {
    proc_root: PathBuf,
    /// The zone sockstat runs in.
    own: Zone,
    top: usize,
    owners: OwnerCache,
    sampler: Sampler,
    previous: Option<Sample>,
    /// The sample just taken, being trimmed to what the next collection's diagnosis reads
    /// (and the one before it dropped) off the scrape's path: the next collection's previous.
    trimming: Option<std::thread::JoinHandle<Sample>>,
    /// The codes of the warnings last logged: a warning is logged when it appears, not at
    /// every scrape.
    logged: Vec<sockstat::WarningCode>,
    /// With --events: the events summed by the draining thread, and the drop counter.
    events: Option<EventsFeed>,
}

/// What `--events` adds to each collection.
struct EventsFeed {
    metrics: Arc<Mutex<EventMetrics>>,
    drops: DropCounter,
}

/// One collection, rendered.
struct Collected {
    body: Vec<u8>,
    finished: Instant,
    duration: Duration,
    zones: usize,
}

impl Collector {
    fn new(proc_root: PathBuf, zones: ZoneSelect, top: usize, owner_scan: OwnerScan) -> Collector {
        let mut q = Query::new();
        q.owners = false;
        q.resolve_users = false;
        q.tcp_info = true;
        q.memory = true;
        q.congestion = true;
        // Every family is keyed by its labels and written in their order, and the diagnosis is
        // exported as counts by rule and severity: nothing here depends on the sockets' order,
        // so they are not sorted (render::metrics' test `the_exposition_does_not_depend_on_the_order_of_sockets`).
        q.sorted = false;
        // Unix sockets are only counted by state: their names, peers and memory go unread.
        q.unix_details = false;
        q.proc_root = proc_root.clone();
        q.zones = zones;
        Collector {
            own: own_zone(&proc_root),
            proc_root,
            top,
            owners: OwnerCache::new(owner_scan),
            sampler: Sampler::new(&q),
            previous: None,
            trimming: None,
            logged: Vec::new(),
            events: None,
        }
    }

    fn collect(&mut self) -> anyhow::Result<Collected> {
        let start = Instant::now();
        if let Some(t) = self.trimming.take() {
            // A trim that panicked leaves no earlier sample: this collection has no diagnosis.
            self.previous = t.join().ok();
        }
        let mut now = self.sampler.sample().context("listing sockets")?;
        let owner_warnings = self.owners.fill(&mut now.zones, &self.proc_root);
        // What the collection could not read (counters, sysctls, zones it may not enter, the
        // holders of listeners) leaves metrics out: say so in the log when it starts, not at
        // every scrape.
        let warnings: Vec<&sockstat::Warning> =
            now.warnings.iter().chain(&owner_warnings).collect();
        let codes: Vec<sockstat::WarningCode> = warnings.iter().map(|w| w.code).collect();
        if codes != self.logged {
            for w in warnings.iter().filter(|w| !self.logged.contains(&w.code)) {
                eprintln!("sockstat: warning: {}", w.message);
            }
            self.logged = codes;
        }
        let reports: Vec<sockstat::ports::PortsReport> = now
            .zones
            .iter()
            .map(|z| sockstat::ports::analyze_zone(z, None, None, None))
            .collect();
        let findings = self
            .previous
            .as_ref()
            .map(|before| judge(before, &now, &Diagnosis::default()).findings);
        let zones: Vec<ZoneMetrics<'_>> = now
            .zones
            .iter()
            .zip(&reports)
            .map(|(z, r)| ZoneMetrics {
                sample: z,
                ports: Some(r),
            })
            .collect();
        // The events summed so far, less the namespaces no longer in the collection (their
        // series end, and a host whose containers come and go does not accumulate them).
        let events = match &self.events {
            Some(feed) => {
                let present: Vec<u64> = now
                    .zones
                    .iter()
                    .filter_map(|z| z.zone.as_ref().and_then(|z| z.netns_inode).or(z.key))
                    .collect();
                let mut shared = feed.metrics.lock().unwrap_or_else(|p| p.into_inner());
                let own = shared.own_netns;
                shared.retain_zones(|n| Some(n) == own || present.contains(&n));
                let m = shared.clone();
                drop(shared);
                let drops = feed.drops.read().context("reading the drops map")?;
                Some((m, drops))
            }
            None => None,
        };
        let mut body = Vec::with_capacity(64 * 1024);
        metrics::write_snapshot(
            &MetricsInput {
                zones: &zones,
                own: &self.own,
                top: self.top,
                findings: findings.as_deref(),
                events: events.as_ref().map(|(m, d)| (m, Some(d))),
            },
            &mut body,
        )?;
        drop(zones);
        let n_zones = now.zones.len();
        // Diagnosis reads the earlier sample only through its counters and the TCP sockets it
        // can join by cookie (those with tcp_info): keep just those, to halve what is held
        // between scrapes on a host full of unix and UDP sockets. Freeing the rest (and the
        // sample before) is 5 ms at 60k sockets, done on another thread while this scrape is
        // answered.
        let before = self.previous.take();
        self.trimming = Some(std::thread::spawn(move || {
            drop(before);
            for z in &mut now.zones {
                z.snapshot
                    .sockets
                    .retain(|s| s.proto == Proto::Tcp && s.cookie.is_some() && s.tcp.is_some());
                z.snapshot.processes.clear();
            }
            now
        }));
        Ok(Collected {
            body,
            finished: Instant::now(),
            duration: start.elapsed(),
            zones: n_zones,
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
    let mut collector = Collector::new(proc_root.clone(), zones, a.top, owner_scan);
    if let Some((tracer, drops)) = events {
        collector.events = Some(EventsFeed {
            metrics: drain_events(tracer, all_zones)?,
            drops,
        });
    }
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
                st.owner_scans = collector.owners.scans;
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

/// Sums the events of the namespace sockstat runs in (of every namespace with `all_zones`),
/// read every 100 ms on a thread of their own, into the metrics each collection renders.
fn drain_events(mut tracer: Tracer, all_zones: bool) -> anyhow::Result<Arc<Mutex<EventMetrics>>> {
    let own = sockstat::run::events::own_netns();
    let metrics = Arc::new(Mutex::new(EventMetrics::new(own)));
    let sink = Arc::clone(&metrics);
    let clock = sockstat::events::Clock::now();
    std::thread::Builder::new()
        .name("events".into())
        .spawn(move || {
            // Reading the ring buffer takes no privilege: this thread holds none.
            let _ = privileges::keep_in_this_thread(CapabilitySet::empty());
            events_loop(&mut tracer, &clock, own, all_zones, &sink);
        })
        .context("starting the events thread")?;
    Ok(metrics)
}

/// The events thread's work: every 100 ms, the events of the namespaces wanted, summed.
fn events_loop(
    tracer: &mut Tracer,
    clock: &sockstat::events::Clock,
    own: Option<u64>,
    all_zones: bool,
    sink: &Mutex<EventMetrics>,
) {
    loop {
        let mut batch = Vec::new();
        tracer.drain(|r| {
            if let Some(e) = ConnEvent::from_record(&r, clock) {
                if all_zones || Some(e.netns) == own {
                    batch.push(e);
                }
            }
        });
        let lost = tracer.lost();
        {
            let mut m = sink.lock().unwrap_or_else(|p| p.into_inner());
            for e in &batch {
                m.add(e);
            }
            if let Ok(l) = lost {
                m.lost = l;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
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
    use sockstat::{Family, SockType};

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

    fn socket(inode: u64, state: State) -> sockstat::Socket {
        let mut s = sockstat::Socket::new(
            Proto::Tcp,
            Family::Inet,
            SockType::Stream,
            state,
            Endpoint::Inet {
                addr: "127.0.0.1".parse().unwrap(),
                port: 8080,
            },
            None,
        );
        s.id = Some(inode);
        s.cookie = Some(inode);
        s.send_q = 128;
        s.uid = Some(0);
        s.owners_status = OwnersStatus::NotRequested;
        s
    }

    /// The replay fixture's /proc: pid 4242 (sockholder) holds socket:[3331811] as fd 11 and
    /// socket:[3331812] as fd 12, which pid 4444 holds too, as fd 3.
    fn fixture_proc() -> PathBuf {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/replay/basic/proc"
        ))
    }

    /// One zone (key `key`) holding `sockets`.
    fn zone(key: Option<u64>, sockets: Vec<sockstat::Socket>) -> ZoneSample {
        let mut z = ZoneSample::default();
        z.key = key;
        z.snapshot.sockets = sockets;
        z
    }

    fn command(z: &ZoneSample, pid: u32) -> Option<String> {
        z.snapshot
            .process(pid)
            .and_then(|p| p.command.as_ref())
            .map(|c| c.to_string_lossy().into_owned())
    }

    #[test]
    fn the_owner_cache_scans_only_for_a_listener_it_does_not_know() {
        let proc_root = fixture_proc();
        let mut cache = OwnerCache::new(OwnerScan::Proc);
        let mut zones = vec![zone(None, vec![socket(3331811, State::Listen)])];
        assert!(cache.fill(&mut zones, &proc_root).is_empty());
        assert_eq!(cache.scans, 1);
        let s = &zones[0].snapshot.sockets[0];
        assert_eq!(s.owners, vec![Owner::new(4242, 11)]);
        assert_eq!(s.owners_status, OwnersStatus::Known);
        assert_eq!(command(&zones[0], 4242).as_deref(), Some("sockholder"));

        // Same listener, plus a connection nobody asked owners for: served from the cache.
        let mut zones = vec![zone(
            None,
            vec![
                socket(3331811, State::Listen),
                socket(999_999, State::Established),
            ],
        )];
        cache.fill(&mut zones, &proc_root);
        assert_eq!(cache.scans, 1);
        assert_eq!(
            zones[0].snapshot.sockets[0].owners,
            vec![Owner::new(4242, 11)]
        );
        assert!(zones[0].snapshot.sockets[1].owners.is_empty());
        assert!(zones[0].snapshot.process(4242).is_some());

        // A new listener inode: one more scan.
        let mut zones = vec![zone(
            None,
            vec![
                socket(3331811, State::Listen),
                socket(3331812, State::Listen),
            ],
        )];
        cache.fill(&mut zones, &proc_root);
        assert_eq!(cache.scans, 2);
        assert_eq!(
            zones[0].snapshot.sockets[1].owners,
            vec![Owner::new(4242, 12), Owner::new(4444, 3)]
        );
    }

    /// Issue 31: a listener's status is the listing's (`sockstat::join`), from what the last
    /// scan could not see: a root-made listener whose only visible holder runs as another user,
    /// beside a root process the scan could not read, is partial; the warning the log gets
    /// counts it among the listeners.
    #[test]
    fn a_listener_is_partial_to_the_exporter_as_to_the_listing() {
        let mut cache = OwnerCache::new(OwnerScan::Proc);
        cache.refreshed = Some(Instant::now());
        cache
            .by_listener
            .insert((None, 7), vec![Owner::new(100, 3)]);
        cache.processes.insert(100, {
            let mut p = Process::new(100);
            p.command = Some(sockstat::RawString::new(b"worker"));
            p.uid = Some(65534);
            p
        });
        cache.unseen = sockstat::join::Unseen {
            unreadable: vec![(1, Some(0))],
            euid: 65534,
            ..Default::default()
        };
        let mut zones = vec![zone(None, vec![socket(7, State::Listen)])];
        let warnings = cache.fill(&mut zones, std::path::Path::new("/nonexistent"));
        assert_eq!(cache.scans, 0, "served from the cache");
        let s = &zones[0].snapshot.sockets[0];
        assert_eq!(s.owners_status, OwnersStatus::Partial);
        let hidden: Vec<_> = warnings
            .iter()
            .filter(|w| w.code == sockstat::WarningCode::OwnersHidden)
            .collect();
        assert_eq!(hidden.len(), 1, "{warnings:?}");
        assert_eq!(hidden[0].count, Some(1));
        // The same listener created by the worker's user: its creator is in view.
        let mut zones = vec![zone(
            None,
            vec![{
                let mut s = socket(7, State::Listen);
                s.uid = Some(65534);
                s
            }],
        )];
        assert!(cache
            .fill(&mut zones, std::path::Path::new("/nonexistent"))
            .is_empty());
        assert_eq!(
            zones[0].snapshot.sockets[0].owners_status,
            OwnersStatus::Known
        );
    }

    #[test]
    fn one_scan_serves_every_zone_and_listeners_are_known_per_zone() {
        let proc_root = fixture_proc();
        let mut cache = OwnerCache::new(OwnerScan::Proc);
        // Two zones, each with a listener: one scan names both, each zone gets the process
        // records of its own listeners only.
        let mut zones = vec![
            zone(Some(1), vec![socket(3331811, State::Listen)]),
            zone(Some(2), vec![socket(3331812, State::Listen)]),
        ];
        assert!(cache.fill(&mut zones, &proc_root).is_empty());
        assert_eq!(cache.scans, 1);
        assert_eq!(
            zones[1].snapshot.sockets[0].owners,
            vec![Owner::new(4242, 12), Owner::new(4444, 3)]
        );
        assert!(zones[0].snapshot.process(4444).is_none());
        assert!(zones[1].snapshot.process(4444).is_some());
        // The same zones again: no scan. A zone that went away is forgotten.
        let mut zones = vec![zone(Some(2), vec![socket(3331812, State::Listen)])];
        cache.fill(&mut zones, &proc_root);
        assert_eq!(cache.scans, 1);
        assert_eq!(cache.by_listener.len(), 1);
        // A listener inode known in zone 2 but now seen in a new zone 3 is a new listener.
        let mut zones = vec![zone(Some(3), vec![socket(3331812, State::Listen)])];
        cache.fill(&mut zones, &proc_root);
        assert_eq!(cache.scans, 2);
        assert_eq!(zones[0].snapshot.sockets[0].owners.len(), 2);
    }
}
