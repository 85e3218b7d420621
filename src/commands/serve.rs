//! `sockstat serve`: a Prometheus exporter. `GET /metrics` answers in the text exposition format
//! (`sockstat::render::metrics`) from a fresh collection of the namespace sockstat runs in.
//!
//! The HTTP layer (TLS, authentication, methods) is `crate::http`; this file answers its
//! requests. One worker thread collects, so collections never overlap; scrapes arriving together
//! (one thread per connection) wait for the same collection. A scrape waits for it at most
//! `--scrape-budget`; past it, the scrape is answered from the last collection with its age
//! (`sockstat_snapshot_age_seconds`) while the worker finishes, and the next scrape gets the
//! result. The worker keeps what the next collection reuses: the previous sample (diagnosis
//! needs two) and an owner cache (socket inode → holders) for the listening sockets, the only
//! sockets whose owners the metrics show, so the /proc scan runs only when a listener appears
//! that the cache does not know (or the cache is older than [`OWNER_REFRESH`]). doc/serve.md
//! describes every metric.

use std::collections::HashMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sockstat::events::drops::DropCounter;
use sockstat::events::metrics::EventMetrics;
use sockstat::events::{ConnEvent, Tracer};
use sockstat::render::metrics::{self, MetricsInput, SelfMetrics};
use sockstat::{
    judge, Diagnosis, Endpoint, Owner, OwnersStatus, Process, Proto, Query, Sample, Sampler,
    Snapshot, State,
};

use crate::cli::Cli;
use crate::http::{Method, Request, Response, Server};
use crate::privileges;

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
#[command(after_help = "\
Metrics (doc/serve.md): sockstat_sockets, sockstat_listen_queue, sockstat_listen_backlog,
sockstat_ephemeral_ports_used, sockstat_ephemeral_ports_usage_ratio,
sockstat_ephemeral_ports_usable, sockstat_ephemeral_destinations, sockstat_findings,
sockstat_kernel_trouble_total, sockstat_listeners_command_unknown, sockstat_up,
sockstat_scrape_duration_seconds, sockstat_snapshot_age_seconds,
sockstat_collect_duration_seconds, sockstat_scrape_budget_exceeded_total,
sockstat_owner_scans_total. sockstat_findings needs two collections: the first scrape has none.
With --events: sockstat_connect_latency_seconds, sockstat_accept_wait_seconds (histograms by
port), sockstat_connections_total, sockstat_connect_failures_total,
sockstat_connection_closes_total, sockstat_events_lost_total, sockstat_drops_total,
sockstat_drops_uncounted_total.
GET and HEAD are answered; other methods get 405.

Privileges: it keeps CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE (to name the processes holding
listeners) and drops every other capability once it listens.

Examples:
  sockstat serve                             http://127.0.0.1:9277/metrics
  sockstat serve --listen 0.0.0.0:9277       every interface (metrics name processes: firewall it)
  sockstat serve --top 50 --scrape-budget 10s
  sockstat serve --events                    also connect latency, accept wait and drops (root)
  sockstat serve --web.config.file /etc/sockstat/web.yml   TLS and passwords (doc/serve.md)

Exit status: runs until stopped; 2 when it cannot listen, the web configuration file is bad,
or the flags are wrong.")]
pub struct ServeArgs {
    /// Address and port to serve /metrics on. Loopback by default: the metrics name processes,
    /// addresses and ports.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9277")]
    pub listen: SocketAddr,
    /// Destinations the ephemeral-port metrics show, largest use first (bounds their label
    /// cardinality).
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

/// Owners of the listening sockets, by socket inode, with the processes they name.
#[derive(Default)]
struct OwnerCache {
    by_inode: HashMap<u64, Vec<Owner>>,
    processes: HashMap<u32, Process>,
    refreshed: Option<Instant>,
    scans: u64,
}

fn listener_inode(s: &sockstat::Socket) -> Option<u64> {
    (s.state == State::Listen && matches!(s.local, Endpoint::Inet { .. }))
        .then_some(s.id)
        .flatten()
}

impl OwnerCache {
    /// Gives the snapshot's listeners their holders: from the cache when every listener inode
    /// is known to it and it is fresh, else from one full /proc scan that refills it. Returns a
    /// warning text when the scan failed.
    fn fill(&mut self, snap: &mut Snapshot, proc_root: &std::path::Path) -> Option<String> {
        let inodes: Vec<u64> = snap.sockets.iter().filter_map(listener_inode).collect();
        let stale = self.refreshed.is_none_or(|t| t.elapsed() >= OWNER_REFRESH);
        let mut warning = None;
        if stale || inodes.iter().any(|i| !self.by_inode.contains_key(i)) {
            self.scans += 1;
            self.refreshed = Some(Instant::now());
            let mut q = Query::new();
            q.proc_root = proc_root.to_path_buf();
            match sockstat::scan_owners(&q) {
                Ok(scan) => {
                    self.by_inode = inodes
                        .iter()
                        .map(|&id| {
                            let holders = scan.index.holders_of(id);
                            (id, holders.iter().map(|x| x.owner).collect())
                        })
                        .collect();
                    let mut procs = scan.processes;
                    self.processes = self
                        .by_inode
                        .values()
                        .flatten()
                        .filter_map(|o| Some((o.pid, procs.remove(&o.pid)?)))
                        .collect();
                }
                Err(e) => {
                    // Remember the inodes anyway: a failing scan is retried at the refresh.
                    self.by_inode = inodes.iter().map(|&i| (i, Vec::new())).collect();
                    self.processes.clear();
                    warning = Some(e.to_string());
                }
            }
        } else {
            // Forget listeners that closed, so the cache stays as small as the listener set.
            let live: std::collections::HashSet<u64> = inodes.iter().copied().collect();
            self.by_inode.retain(|i, _| live.contains(i));
        }
        for s in &mut snap.sockets {
            if let Some(owners) = listener_inode(s).and_then(|i| self.by_inode.get(&i)) {
                s.owners = owners.clone();
                s.owners_status = if owners.is_empty() {
                    OwnersStatus::None
                } else {
                    OwnersStatus::Known
                };
            }
        }
        snap.processes = self.processes.clone();
        warning
    }
}

/// What the worker keeps between collections.
struct Collector {
    proc_root: PathBuf,
    zone: String,
    top: usize,
    owners: OwnerCache,
    sampler: Sampler,
    previous: Option<Sample>,
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
}

impl Collector {
    fn new(proc_root: PathBuf, zone: String, top: usize) -> Collector {
        let mut q = Query::new();
        q.owners = false;
        q.resolve_users = false;
        q.tcp_info = true;
        q.memory = true;
        q.congestion = true;
        q.proc_root = proc_root.clone();
        Collector {
            proc_root,
            zone,
            top,
            owners: OwnerCache::default(),
            sampler: Sampler::new(&q),
            previous: None,
            logged: Vec::new(),
            events: None,
        }
    }

    fn collect(&mut self) -> anyhow::Result<Collected> {
        let start = Instant::now();
        let mut now = self.sampler.sample().context("listing sockets")?;
        // What the collection could not read (counters, sysctls) leaves metrics out: say so in
        // the log when it starts, not at every scrape.
        let codes: Vec<sockstat::WarningCode> = now.warnings.iter().map(|w| w.code).collect();
        if codes != self.logged {
            for w in now
                .warnings
                .iter()
                .filter(|w| !self.logged.contains(&w.code))
            {
                eprintln!("sockstat: warning: {}", w.message);
            }
            self.logged = codes;
        }
        for z in &mut now.zones {
            if let Some(w) = self.owners.fill(&mut z.snapshot, &self.proc_root) {
                eprintln!("sockstat: warning: no process information for listeners: {w}");
            }
        }
        let here = now
            .zones
            .first()
            .context("the sample has no namespace in it")?;
        let report = sockstat::ports::analyze_zone(here, None, None, None);
        let findings = self
            .previous
            .as_ref()
            .map(|before| judge(before, &now, &Diagnosis::default()).findings);
        let mut body = Vec::with_capacity(64 * 1024);
        metrics::write_snapshot(
            &MetricsInput {
                snapshot: &here.snapshot,
                zone: &self.zone,
                ports: Some(&report),
                top: self.top,
                findings: findings.as_deref(),
                counters: here.counters.as_ref(),
            },
            &mut body,
        )?;
        if let Some(feed) = &self.events {
            let m = feed
                .metrics
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let drops = feed.drops.read().context("reading the drops map")?;
            sockstat::render::event_metrics::write(&m, Some(&drops), &mut body)?;
        }
        // Diagnosis reads the earlier sample only through its counters and the TCP sockets it
        // can join by cookie (those with tcp_info): keep just those, to halve what is held
        // between scrapes on a host full of unix and UDP sockets.
        for z in &mut now.zones {
            z.snapshot
                .sockets
                .retain(|s| s.proto == Proto::Tcp && s.cookie.is_some() && s.tcp.is_some());
            z.snapshot.processes.clear();
        }
        self.previous = Some(now);
        Ok(Collected {
            body,
            finished: Instant::now(),
            duration: start.elapsed(),
        })
    }
}

/// The name of the namespace sockstat runs in, as `-Z` would show it (`global` on the host).
fn own_zone(proc_root: &std::path::Path) -> String {
    sockstat::current_zone(proc_root).map_or_else(|| "global".to_string(), |z| z.name)
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
pub fn run(a: &ServeArgs, _cli: &Cli) -> anyhow::Result<ExitCode> {
    let proc_root = a
        .proc_root
        .clone()
        .unwrap_or_else(|| PathBuf::from("/proc"));
    // Connection events: the programs are loaded and attached first (while the capabilities
    // to do so are still there; reading them afterwards needs none), so that everything after
    // the "serving" line is counted.
    let events = if a.events {
        Some(start_events().map_err(|e| anyhow::anyhow!("--events: {e}"))?)
    } else {
        None
    };
    let server = Server::bind(a.listen, a.web_config_file.as_deref())
        .map_err(|e| anyhow::anyhow!("{}", e))?;
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
    // what naming owners takes, before any thread starts (capabilities are per thread).
    let kept = privileges::keep_only(privileges::EXPORTER).context("dropping capabilities")?;
    if !kept.missing.is_empty() {
        eprintln!(
            "sockstat: warning: without {}, listeners held by other users' processes are \
             labelled command=\"?\" (give it those capabilities or run it as root; doc/serve.md)",
            privileges::names(kept.missing).join(" and ")
        );
    }

    let shared = Arc::new(Shared {
        state: Mutex::new(State0::default()),
        done: Condvar::new(),
    });
    let (tx, rx) = mpsc::channel::<()>();
    let mut collector = Collector::new(proc_root.clone(), own_zone(&proc_root), a.top);
    if let Some((tracer, drops)) = events {
        collector.events = Some(EventsFeed {
            metrics: drain_events(tracer)?,
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
                        st.last = Some(Arc::new(c));
                        st.last_error = None;
                    }
                    Err(e) => {
                        eprintln!("sockstat: collection failed: {e:#}");
                        st.last_error = Some(format!("{e:#}"));
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
fn start_events() -> Result<(Tracer, DropCounter), String> {
    let tracer = Tracer::start(false, sockstat::events::RING_BYTES).map_err(|u| u.message)?;
    if let Some(why) = &tracer.accept_unavailable {
        eprintln!("sockstat: warning: accept() is not traced ({why}): no accept-wait histograms");
    }
    let drops = DropCounter::start().map_err(|u| u.message)?;
    Ok((tracer, drops))
}

/// Sums the events of the namespace sockstat runs in, read every 100 ms on a thread of their
/// own, into the metrics each collection renders.
fn drain_events(mut tracer: Tracer) -> anyhow::Result<Arc<Mutex<EventMetrics>>> {
    let metrics = Arc::new(Mutex::new(EventMetrics::default()));
    let sink = Arc::clone(&metrics);
    let own = sockstat::events::own_netns();
    let clock = sockstat::events::Clock::now();
    std::thread::Builder::new()
        .name("events".into())
        .spawn(move || loop {
            let mut batch = Vec::new();
            tracer.drain(|r| {
                if let Some(e) = ConnEvent::from_record(&r, &clock) {
                    if Some(e.netns) == own {
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
        })
        .context("starting the events thread")?;
    Ok(metrics)
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
        sockstat::Socket {
            id: Some(inode),
            cookie: Some(inode),
            send_q: 128,
            uid: Some(0),
            owners_status: OwnersStatus::NotRequested,
            ..sockstat::Socket::new(
                Proto::Tcp,
                Family::Inet,
                SockType::Stream,
                state,
                Endpoint::Inet {
                    addr: "127.0.0.1".parse().unwrap(),
                    port: 8080,
                },
                None,
            )
        }
    }

    /// The replay fixture's /proc: pid 4242 (sockholder) holds socket:[3331811] as fd 11 and
    /// socket:[3331812] as fd 12, which pid 4444 holds too, as fd 3.
    fn fixture_proc() -> PathBuf {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/replay/basic/proc"
        ))
    }

    #[test]
    fn the_owner_cache_scans_only_for_a_listener_it_does_not_know() {
        let proc_root = fixture_proc();
        let mut cache = OwnerCache::default();
        let mut snap = Snapshot {
            sockets: vec![socket(3331811, State::Listen)],
            ..Snapshot::default()
        };
        assert_eq!(cache.fill(&mut snap, &proc_root), None);
        assert_eq!(cache.scans, 1);
        assert_eq!(snap.sockets[0].owners, vec![Owner { pid: 4242, fd: 11 }]);
        assert_eq!(snap.sockets[0].owners_status, OwnersStatus::Known);
        let cmd = snap.process(4242).and_then(|p| p.command.as_ref());
        assert_eq!(
            cmd.map(|c| c.to_string_lossy().into_owned()).as_deref(),
            Some("sockholder")
        );

        // Same listener, plus a connection nobody asked owners for: served from the cache.
        let mut snap = Snapshot {
            sockets: vec![
                socket(3331811, State::Listen),
                socket(999_999, State::Established),
            ],
            ..Snapshot::default()
        };
        cache.fill(&mut snap, &proc_root);
        assert_eq!(cache.scans, 1);
        assert_eq!(snap.sockets[0].owners, vec![Owner { pid: 4242, fd: 11 }]);
        assert!(snap.sockets[1].owners.is_empty());
        assert!(snap.process(4242).is_some());

        // A new listener inode: one more scan.
        let mut snap = Snapshot {
            sockets: vec![
                socket(3331811, State::Listen),
                socket(3331812, State::Listen),
            ],
            ..Snapshot::default()
        };
        cache.fill(&mut snap, &proc_root);
        assert_eq!(cache.scans, 2);
        assert_eq!(
            snap.sockets[1].owners,
            vec![Owner { pid: 4242, fd: 12 }, Owner { pid: 4444, fd: 3 }]
        );
    }
}
