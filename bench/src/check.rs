//! The checker: parses what each tool printed and compares it with what the generator
//! made (its truth file), on the scope the tool claims.

use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Cat {
    Tcp4Listen,
    Tcp6Listen,
    Tcp4Estab,
    Tcp6Estab,
    Tcp4Tw,
    Tcp6Tw,
    Udp4,
    Udp6,
    UnixStream,
    UnixDgram,
    UnixOther,
    Other,
}

impl Cat {
    pub fn key(self) -> &'static str {
        match self {
            Cat::Tcp4Listen => "tcp4_listen",
            Cat::Tcp6Listen => "tcp6_listen",
            Cat::Tcp4Estab => "tcp4_estab",
            Cat::Tcp6Estab => "tcp6_estab",
            Cat::Tcp4Tw => "tcp4_tw",
            Cat::Tcp6Tw => "tcp6_tw",
            Cat::Udp4 => "udp4",
            Cat::Udp6 => "udp6",
            Cat::UnixStream => "unix_stream",
            Cat::UnixDgram => "unix_dgram",
            Cat::UnixOther => "unix_other",
            Cat::Other => "other",
        }
    }
    fn is_inet(self) -> bool {
        !matches!(
            self,
            Cat::UnixStream | Cat::UnixDgram | Cat::UnixOther | Cat::Other
        )
    }
    fn is_tw(self) -> bool {
        matches!(self, Cat::Tcp4Tw | Cat::Tcp6Tw)
    }
}

/// One socket (or one row) as a tool reported it.
pub struct Rec {
    pub cat: Cat,
    pub lport: u16,
    pub rport: u16,
    pub listen: bool,
    pub pids: Vec<u32>,
}

fn tcp_cat(v6: bool, state: &str) -> (Cat, bool) {
    let s = state.to_ascii_uppercase().replace('-', "_");
    if s == "LISTEN" {
        (if v6 { Cat::Tcp6Listen } else { Cat::Tcp4Listen }, true)
    } else if s == "TIME_WAIT" {
        (if v6 { Cat::Tcp6Tw } else { Cat::Tcp4Tw }, false)
    } else {
        (if v6 { Cat::Tcp6Estab } else { Cat::Tcp4Estab }, false)
    }
}

fn port_of(addr: &str) -> u16 {
    addr.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0)
}

/// `ss -tuan[p]`
pub fn parse_ss(out: &str) -> Vec<Rec> {
    let mut v = Vec::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[0] == "Netid" {
            continue;
        }
        let v6 = f[4].starts_with('[');
        let (cat, listen) = match f[0] {
            "tcp" => tcp_cat(v6, f[1]),
            "udp" => (if v6 { Cat::Udp6 } else { Cat::Udp4 }, false),
            _ => (Cat::Other, false),
        };
        let mut pids = Vec::new();
        if f.len() > 6 {
            let users = f[6..].join(" ");
            for part in users.split("pid=").skip(1) {
                let n: String = part.chars().take_while(|c| c.is_ascii_digit()).collect();
                if let Ok(p) = n.parse() {
                    pids.push(p);
                }
            }
        }
        v.push(Rec {
            cat,
            lport: port_of(f[4]),
            rport: port_of(f[5]),
            listen,
            pids,
        });
    }
    v
}

/// `netstat -tuanp`
pub fn parse_netstat(out: &str) -> Vec<Rec> {
    let mut v = Vec::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || !matches!(f[0], "tcp" | "tcp6" | "udp" | "udp6") {
            continue;
        }
        let v6 = f[0].ends_with('6');
        let (cat, listen, owner) = if f[0].starts_with("tcp") {
            let (c, l) = tcp_cat(v6, f[5]);
            (c, l, f.get(6).copied())
        } else {
            let c = if v6 { Cat::Udp6 } else { Cat::Udp4 };
            // udp rows have an empty or a state column before PID/Program
            let owner = if f.len() >= 7 {
                f.get(6).copied()
            } else {
                f.get(5).copied()
            };
            (c, false, owner)
        };
        let pids = owner
            .and_then(|o| o.split('/').next())
            .and_then(|p| p.parse().ok())
            .into_iter()
            .collect();
        v.push(Rec {
            cat,
            lport: port_of(f[3]),
            rport: port_of(f[4]),
            listen,
            pids,
        });
    }
    v
}

/// `lsof -nP -i`
pub fn parse_lsof(out: &str) -> Vec<Rec> {
    let mut v = Vec::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(ti) = f.iter().position(|x| *x == "IPv4" || *x == "IPv6") else {
            continue;
        };
        let v6 = f[ti] == "IPv6";
        let Some(ni) = f
            .iter()
            .skip(ti)
            .position(|x| *x == "TCP" || *x == "UDP")
            .map(|i| i + ti)
        else {
            continue;
        };
        let name = f.get(ni + 1).copied().unwrap_or("");
        let state = f
            .get(ni + 2)
            .map(|s| s.trim_matches(|c| c == '(' || c == ')'))
            .unwrap_or("");
        let (l, r) = name.split_once("->").unwrap_or((name, ""));
        let (cat, listen) = if f[ni] == "TCP" {
            tcp_cat(v6, state)
        } else {
            (if v6 { Cat::Udp6 } else { Cat::Udp4 }, false)
        };
        let pids = f.get(1).and_then(|p| p.parse().ok()).into_iter().collect();
        v.push(Rec {
            cat,
            lport: port_of(l),
            rport: port_of(r),
            listen,
            pids,
        });
    }
    v
}

/// Our psutil printer: `family type lport rport status pid` per line, tab-separated.
pub fn parse_psutil(out: &str) -> Vec<Rec> {
    let mut v = Vec::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 6 {
            continue;
        }
        let family: i32 = f[0].parse().unwrap_or(0);
        let ty: i32 = f[1].parse().unwrap_or(0);
        let (cat, listen) = match (family, ty) {
            (2 | 10, 1) => tcp_cat(family == 10, f[4]),
            (2, 2) => (Cat::Udp4, false),
            (10, 2) => (Cat::Udp6, false),
            (1, 1) => (Cat::UnixStream, f[4] == "LISTEN"),
            (1, 2) => (Cat::UnixDgram, false),
            (1, _) => (Cat::UnixOther, false),
            _ => (Cat::Other, false),
        };
        let pids = f[5].parse().ok().into_iter().collect();
        v.push(Rec {
            cat,
            lport: f[2].parse().unwrap_or(0),
            rport: f[3].parse().unwrap_or(0),
            listen,
            pids,
        });
    }
    v
}

/// Debian's sockstat 0.4.1: `USER PROCESS PID PROTO SOURCE FOREIGN STATE`
pub fn parse_debsockstat(out: &str) -> Vec<Rec> {
    let mut v = Vec::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(pi) = f
            .iter()
            .position(|x| matches!(*x, "tcp4" | "tcp6" | "udp4" | "udp6" | "unix"))
        else {
            continue;
        };
        if pi < 1 {
            continue;
        }
        let pids = f[pi - 1].parse().ok().into_iter().collect();
        let proto = f[pi];
        let (cat, listen, lp, rp) = match proto {
            "tcp4" | "tcp6" => {
                let (c, l) = tcp_cat(proto == "tcp6", f.get(pi + 3).copied().unwrap_or(""));
                (
                    c,
                    l,
                    port_of(f.get(pi + 1).unwrap_or(&"")),
                    port_of(f.get(pi + 2).unwrap_or(&"")),
                )
            }
            "udp4" => (Cat::Udp4, false, port_of(f.get(pi + 1).unwrap_or(&"")), 0),
            "udp6" => (Cat::Udp6, false, port_of(f.get(pi + 1).unwrap_or(&"")), 0),
            // unix rows carry no type (and often a wrong path, see doc/reference/baseline-study.md#notes)
            _ => (Cat::UnixStream, false, 0, 0),
        };
        v.push(Rec {
            cat,
            lport: lp,
            rport: rp,
            listen,
            pids,
        });
    }
    v
}

/// sockstat --json (schema version 1). Returns None if it is not that document.
pub fn parse_sockstat_json(out: &str) -> Option<(Vec<Rec>, BTreeMap<String, usize>)> {
    let doc: Value = serde_json::from_str(out).ok()?;
    if doc.get("version")?.as_u64()? != 1 {
        return None;
    }
    let mut v = Vec::new();
    let mut owners_status: BTreeMap<String, usize> = BTreeMap::new();
    for s in doc.get("sockets")?.as_array()? {
        let proto = s.get("proto").and_then(Value::as_str).unwrap_or("");
        let family = s.get("family").and_then(Value::as_str).unwrap_or("");
        let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
        let state = s.get("state").and_then(Value::as_str).unwrap_or("");
        let v6 = family == "inet6";
        let (cat, listen) = match proto {
            "tcp" => tcp_cat(v6, state),
            "udp" => (if v6 { Cat::Udp6 } else { Cat::Udp4 }, false),
            "unix" => match ty {
                "stream" => (Cat::UnixStream, state == "LISTEN"),
                "dgram" => (Cat::UnixDgram, false),
                _ => (Cat::UnixOther, state == "LISTEN"),
            },
            _ => (Cat::Other, state == "LISTEN"),
        };
        let port = |k: &str| {
            s.get(k)
                .and_then(|a| a.get("port"))
                .and_then(Value::as_u64)
                .unwrap_or(0) as u16
        };
        let pids = s
            .get("owners")
            .and_then(Value::as_array)
            .map(|o| {
                o.iter()
                    .filter_map(|x| x.get("pid")?.as_u64())
                    .map(|p| p as u32)
                    .collect()
            })
            .unwrap_or_default();
        let st = s
            .get("owners_status")
            .and_then(Value::as_str)
            .unwrap_or("absent")
            .to_string();
        *owners_status.entry(st).or_default() += 1;
        v.push(Rec {
            cat,
            lport: port("local"),
            rport: port("remote"),
            listen,
            pids,
        });
    }
    Some((v, owners_status))
}

/// sockstat's table: header `USER COMMAND PID FD PROTO LOCAL ADDRESS FOREIGN ADDRESS`,
/// one row per (socket, owning fd). Returns (rows, rows per pid, rows without owner).
pub fn parse_sockstat_table(out: &str) -> (usize, BTreeMap<u32, usize>, usize) {
    let mut lines = out.lines();
    let mut pid_col = 2;
    for h in lines.by_ref() {
        let f: Vec<&str> = h.split_whitespace().collect();
        if let Some(i) = f.iter().position(|x| *x == "PID") {
            pid_col = i;
            break;
        }
    }
    let (mut rows, mut unowned) = (0, 0);
    let mut per = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        rows += 1;
        match f.get(pid_col).and_then(|p| p.parse::<u32>().ok()) {
            Some(p) => *per.entry(p).or_insert(0) += 1,
            None => unowned += 1,
        }
    }
    (rows, per, unowned)
}

// ---------------------------------------------------------------- truth and comparison

#[derive(Clone)]
pub struct Truth {
    pub counts: BTreeMap<String, usize>,
    pub tw_min: usize,
    pub tw_max: usize,
    pub unix_listen: usize,
    pub churn: Vec<u16>,
    pub probe_port: u16,
    pub probe_count: usize,
    pub per_pid: BTreeMap<u32, (usize, usize)>,
    pub socket_fds: usize,
    pub tw_pid: u32,
}

impl Truth {
    pub fn from_gen(v: &Value) -> Option<Truth> {
        let mut counts = BTreeMap::new();
        for (k, c) in v.get("counts")?.as_object()? {
            counts.insert(k.clone(), c.as_u64()? as usize);
        }
        let tw = v.get("tw")?;
        let mut per_pid = BTreeMap::new();
        for (k, c) in v.get("per_pid")?.as_object()? {
            per_pid.insert(
                k.parse().ok()?,
                (
                    c.get("inet")?.as_u64()? as usize,
                    c.get("unix")?.as_u64()? as usize,
                ),
            );
        }
        Some(Truth {
            counts,
            tw_min: tw.get("min")?.as_u64()? as usize,
            tw_max: tw.get("max")?.as_u64()? as usize,
            unix_listen: v.get("unix_listen")?.as_u64()? as usize,
            churn: v
                .get("churn_ports")?
                .as_array()?
                .iter()
                .filter_map(|x| x.as_u64())
                .map(|x| x as u16)
                .collect(),
            probe_port: v.get("probe_port")?.as_u64()? as u16,
            probe_count: v.get("probe_count")?.as_u64()? as usize,
            per_pid,
            socket_fds: v.get("socket_fds")?.as_u64()? as usize,
            tw_pid: v.get("tw_pid")?.as_u64()? as u32,
        })
    }
}

/// What a tool claims to list.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Scope {
    /// every socket: inet (with TIME_WAIT) and unix
    Full,
    /// every inet socket, with TIME_WAIT
    InetAll,
    /// inet sockets that have an fd (no TIME_WAIT)
    InetFds,
    /// inet and unix sockets that have an fd, but the tool does not tell unix stream from dgram: compare their total
    FdsAllUnixTotal,
    /// listening sockets (TCP and unix stream in LISTEN)
    Listen,
    /// inet sockets with the probe port at either end
    Probe,
}

pub struct Outcome {
    pub ok: bool,
    pub detail: String,
}

/// Compares parsed records with the truth. `tw_range` is the TIME_WAIT range observed
/// around the tool's run; `owners`: compare per-pid counts too.
pub fn compare(
    recs: &[Rec],
    t: &Truth,
    scope: Scope,
    tw_range: (usize, usize),
    owners: bool,
) -> Outcome {
    let mut got: BTreeMap<Cat, usize> = BTreeMap::new();
    let mut per: BTreeMap<u32, (usize, usize)> = BTreeMap::new();
    let (mut churn, mut unix_listen, mut probe) = (0usize, 0usize, 0usize);
    for r in recs {
        if matches!(r.cat, Cat::Tcp4Estab | Cat::Tcp6Estab)
            && (t.churn.contains(&r.lport) || t.churn.contains(&r.rport))
        {
            churn += 1; // short-lived sockets of the TIME_WAIT trickle
            continue;
        }
        *got.entry(r.cat).or_default() += 1;
        if r.listen && matches!(r.cat, Cat::UnixStream | Cat::UnixOther) {
            unix_listen += 1;
        }
        if r.cat.is_inet() && (r.lport == t.probe_port || r.rport == t.probe_port) {
            probe += 1;
        }
        for p in &r.pids {
            let e = per.entry(*p).or_default();
            if r.cat.is_inet() {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
    }
    let mut bad: Vec<String> = Vec::new();
    let g = |c: Cat| got.get(&c).copied().unwrap_or(0);
    let want = |k: &str| t.counts.get(k).copied().unwrap_or(0);
    let inet_cats = [
        Cat::Tcp4Listen,
        Cat::Tcp6Listen,
        Cat::Tcp4Estab,
        Cat::Tcp6Estab,
        Cat::Udp4,
        Cat::Udp6,
    ];
    let unix_cats = [Cat::UnixStream, Cat::UnixDgram];
    let mut exact: Vec<Cat> = Vec::new();
    let (mut tw_in, mut unix_in) = (false, false);
    match scope {
        Scope::Full => {
            exact.extend(inet_cats);
            exact.extend(unix_cats);
            tw_in = true;
            unix_in = true;
        }
        Scope::InetAll => {
            exact.extend(inet_cats);
            tw_in = true;
        }
        Scope::InetFds => exact.extend(inet_cats),
        Scope::FdsAllUnixTotal => {
            exact.extend(inet_cats);
            unix_in = true;
            let have = g(Cat::UnixStream) + g(Cat::UnixDgram) + g(Cat::UnixOther);
            let w = want("unix_stream") + want("unix_dgram");
            if have != w {
                bad.push(format!(
                    "unix {have} (want {w}, {:+})",
                    have as i64 - w as i64
                ));
            }
        }
        Scope::Listen => {
            exact.extend([Cat::Tcp4Listen, Cat::Tcp6Listen]);
            if unix_listen != t.unix_listen {
                bad.push(format!(
                    "unix LISTEN {} (want {})",
                    unix_listen, t.unix_listen
                ));
            }
            let not_listen: usize = recs.iter().filter(|r| !r.listen && !r.cat.is_tw()).count();
            let unix_non: usize = recs
                .iter()
                .filter(|r| {
                    !r.listen && matches!(r.cat, Cat::UnixStream | Cat::UnixDgram | Cat::UnixOther)
                })
                .count();
            // -l may list unconnected UDP and bound unix dgram receivers as "listening" too;
            // established TCP or TIME_WAIT must not appear
            if g(Cat::Tcp4Estab) + g(Cat::Tcp6Estab) + g(Cat::Tcp4Tw) + g(Cat::Tcp6Tw) > 0 {
                bad.push(format!(
                    "non-listening TCP listed: {}",
                    g(Cat::Tcp4Estab) + g(Cat::Tcp6Estab) + g(Cat::Tcp4Tw) + g(Cat::Tcp6Tw)
                ));
            }
            let s = format!(
                "{} (also listed: {} non-LISTEN rows, {} of them unix)",
                summary(&got),
                not_listen,
                unix_non
            );
            return finish(bad, exact, &got, t, s, churn);
        }
        Scope::Probe => {
            let total: usize = got.values().sum();
            if probe != t.probe_count || total != t.probe_count {
                bad.push(format!(
                    "port {}: {} matching of {} listed (want {})",
                    t.probe_port, probe, total, t.probe_count
                ));
            }
            return finish(
                bad,
                Vec::new(),
                &got,
                t,
                format!("{} sockets on port {}", probe, t.probe_port),
                churn,
            );
        }
    }
    let tw = g(Cat::Tcp4Tw) + g(Cat::Tcp6Tw);
    if tw_in {
        if tw < tw_range.0 || tw > tw_range.1 {
            bad.push(format!(
                "TIME_WAIT {} outside {}..{}",
                tw, tw_range.0, tw_range.1
            ));
        }
    } else if tw > 0 {
        bad.push(format!("TIME_WAIT listed: {tw}"));
    }
    if !unix_in {
        let u = g(Cat::UnixStream) + g(Cat::UnixDgram) + g(Cat::UnixOther);
        if u > 0 {
            bad.push(format!("unix listed though out of scope: {u}"));
        }
    }
    if g(Cat::Other) > 0 {
        bad.push(format!("unexpected other sockets: {}", g(Cat::Other)));
    }
    if owners {
        let mut err = 0usize;
        let mut pids: Vec<u32> = t.per_pid.keys().copied().collect();
        pids.extend(per.keys().copied());
        pids.sort_unstable();
        pids.dedup();
        for p in pids {
            let want = t.per_pid.get(&p).copied().unwrap_or((0, 0));
            let have = per.get(&p).copied().unwrap_or((0, 0));
            let wi = if matches!(scope, Scope::Full | Scope::FdsAllUnixTotal) {
                want.0 + want.1
            } else {
                want.0
            };
            let hi = if matches!(scope, Scope::Full | Scope::FdsAllUnixTotal) {
                have.0 + have.1
            } else {
                have.0
            };
            err += wi.abs_diff(hi);
        }
        if err > 0 {
            bad.push(format!("per-pid error {err}"));
        }
    }
    finish(bad, exact, &got, t, summary(&got), churn)
}

fn summary(got: &BTreeMap<Cat, usize>) -> String {
    got.iter()
        .map(|(k, v)| format!("{}={}", k.key(), v))
        .collect::<Vec<_>>()
        .join(" ")
}

fn finish(
    mut bad: Vec<String>,
    exact: Vec<Cat>,
    got: &BTreeMap<Cat, usize>,
    t: &Truth,
    s: String,
    churn: usize,
) -> Outcome {
    for c in exact {
        let h = got.get(&c).copied().unwrap_or(0);
        let w = t.counts.get(c.key()).copied().unwrap_or(0);
        if h != w {
            bad.insert(
                0,
                format!("{} {} (want {}, {:+})", c.key(), h, w, h as i64 - w as i64),
            );
        }
    }
    let mut detail = if bad.is_empty() { s } else { bad.join("; ") };
    if churn > 0 {
        detail.push_str(&format!(" [{churn} trickle sockets left out]"));
    }
    Outcome {
        ok: bad.is_empty(),
        detail,
    }
}

/// Table rows: one per owned socket fd plus one `?` row per socket without an owner.
pub fn compare_rows(
    rows: (usize, BTreeMap<u32, usize>, usize),
    t: &Truth,
    tw_range: (usize, usize),
) -> Outcome {
    let (n, per, unowned) = rows;
    let mut bad = Vec::new();
    let lo = t.socket_fds + tw_range.0;
    let hi = t.socket_fds + tw_range.1 + 8; // + trickle sockets caught mid-flight
    if n < lo || n > hi {
        bad.push(format!("{n} rows, want {lo}..{hi}"));
    }
    let mut err = 0;
    for (p, (i, u)) in &t.per_pid {
        let have = per.get(p).copied().unwrap_or(0);
        // the TIME_WAIT helper's count moves with the trickle
        if *p == t.tw_pid && have >= i + u && have <= i + u + 8 {
            continue;
        }
        err += have.abs_diff(i + u);
    }
    for (p, have) in &per {
        if !t.per_pid.contains_key(p) {
            err += have;
        }
    }
    if err > 0 {
        bad.push(format!("per-pid error {err}"));
    }
    Outcome {
        ok: bad.is_empty(),
        detail: if bad.is_empty() {
            format!("{n} rows, {unowned} without owner")
        } else {
            bad.join("; ")
        },
    }
}

/// The floor's own summary line: `records=.. fds=.. sockets=.. owned=..`
pub fn compare_floor(line: &str, t: &Truth, tw_range: (usize, usize)) -> Outcome {
    let get = |k: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k).and_then(|x| x.strip_prefix('=')))
            .and_then(|x| x.parse::<usize>().ok())
    };
    let mut bad = Vec::new();
    if let Some(r) = get("records") {
        let lo = t.socket_fds + tw_range.0;
        let hi = t.socket_fds + tw_range.1 + 8;
        if r < lo || r > hi {
            bad.push(format!("records {r}, want {lo}..{hi}"));
        }
    }
    if let Some(o) = get("owned") {
        if o != t.socket_fds {
            bad.push(format!("owned {o}, want {}", t.socket_fds));
        }
    } else if let Some(s) = get("sockets") {
        if s != t.socket_fds {
            bad.push(format!("socket fds {s}, want {}", t.socket_fds));
        }
    }
    if get("records").is_none() && get("sockets").is_none() {
        bad.push(format!("unreadable output {line:?}"));
    }
    Outcome {
        ok: bad.is_empty(),
        detail: if bad.is_empty() {
            line.trim().to_string()
        } else {
            bad.join("; ")
        },
    }
}

/// (TIME_WAIT count, category counts, per pid (inet, unix)) from `sockfloor truth`.
pub type FloorCount = (
    usize,
    BTreeMap<String, usize>,
    BTreeMap<u32, (usize, usize)>,
);

/// Floor `truth` JSON -> (TIME_WAIT count, category counts, per pid).
pub fn floor_truth(out: &str) -> Option<FloorCount> {
    let v: Value = serde_json::from_str(out).ok()?;
    let mut counts = BTreeMap::new();
    for (k, c) in v.get("counts")?.as_object()? {
        counts.insert(k.clone(), c.as_u64()? as usize);
    }
    let tw =
        counts.get("tcp4_tw").copied().unwrap_or(0) + counts.get("tcp6_tw").copied().unwrap_or(0);
    let mut per = BTreeMap::new();
    for (k, c) in v.get("per_pid")?.as_object()? {
        per.insert(
            k.parse().ok()?,
            (
                c.get("inet")?.as_u64()? as usize,
                c.get("unix")?.as_u64()? as usize,
            ),
        );
    }
    Some((tw, counts, per))
}

/// Checks the generator's truth against the floor's independent count.
pub fn gen_vs_floor(t: &Truth, fl: &FloorCount) -> Outcome {
    let mut bad = Vec::new();
    for (k, w) in &t.counts {
        let h = fl.1.get(k).copied().unwrap_or(0);
        if h != *w {
            bad.push(format!("{k}: floor {h}, generator {w}"));
        }
    }
    if fl.0 < t.tw_min || fl.0 > t.tw_max {
        bad.push(format!(
            "TIME_WAIT {} outside {}..{}",
            fl.0, t.tw_min, t.tw_max
        ));
    }
    let mut err = 0;
    for (p, w) in &t.per_pid {
        let h = fl.2.get(p).copied().unwrap_or((0, 0));
        err += w.0.abs_diff(h.0) + w.1.abs_diff(h.1);
    }
    if err > 0 {
        bad.push(format!("per-pid error {err}"));
    }
    Outcome {
        ok: bad.is_empty(),
        detail: if bad.is_empty() {
            "generator truth = floor count".into()
        } else {
            bad.join("; ")
        },
    }
}
