//! Bodies of the cargo-fuzz targets that fuzz this crate (`fuzz/fuzz_targets/`), replayed on
//! their corpora by `tests/fuzz_corpus.rs` on stable. Not part of the API. (The filter parsers'
//! body is `query::fuzz_filters`.)

use std::collections::HashMap;

use sockstat_wire::netlink::{classify, messages, Control};
use sockstat_wire::{inet_diag, mountinfo, packet_diag, proc_pid, unix_diag};

use crate::diagnose::{Context, ZoneSample};
use crate::model::{Owner, OwnersStatus, Process, Proto, RawString, Snapshot};
use crate::render::{self, Options};
use crate::sys::dump::{socket_from_inet, socket_from_packet, socket_from_unix};
use crate::sys::{self, owners};
use crate::text::sanitize;
use crate::zone;

/// The body of the `proc_files` cargo-fuzz target (`fuzz/fuzz_targets/proc_files.rs`),
/// replayed on its corpus by `crates/sockstat/tests/fuzz_corpus.rs` on stable. The first byte
/// picks a reader of `/proc` (or `/proc`-like) text, the rest is the file. Much of it is written
/// by the kernel, but inspected processes choose parts of it: a command name in `stat`, cgroup
/// names (anyone with a delegated subtree), container names, mount points. No reader may panic,
/// and each answer must be one the callers can use.
pub fn proc_files(data: &[u8]) {
    let Some((&which, file)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(file);
    match which % 6 {
        0 => {
            // /proc/PID/stat: the fields after the last ')' whatever the command name holds.
            let t = proc_pid::start_ticks(file);
            let k = proc_pid::is_kernel_thread(file);
            if !file.contains(&b')') {
                assert_eq!((t, k), (None, None));
            }
        }
        1 => {
            // /proc/PID/status.
            std::hint::black_box((
                proc_pid::cap_eff(file),
                owners::has_bpf_caps(file),
                proc_pid::effective_uid(file),
                proc_pid::nspid_depth(file),
            ));
        }
        2 => {
            // /proc/self/mountinfo: the hidepid and cgroup2 readers, and the field unescape.
            std::hint::black_box(mountinfo::hidepid_of(&text, b"/proc"));
            std::hint::black_box(mountinfo::cgroup2_mount(&text));
            for field in text.split([' ', '\n']) {
                assert!(mountinfo::unescape(field).len() <= field.len());
            }
        }
        3 => {
            // /proc/PID/cgroup: the container a zone is named after.
            for path in sockstat_wire::cgroup::paths(&text) {
                let Some(c) = zone::container_from_cgroup(path) else {
                    continue;
                };
                // Docker, Podman and containerd zones are named by a hex id of at least 12
                // digits (the short form), never by whatever else the path held.
                if matches!(
                    c.kind,
                    crate::ZoneKind::Docker | crate::ZoneKind::Podman | crate::ZoneKind::Containerd
                ) {
                    let id = c.id.as_deref().unwrap_or("");
                    assert!(
                        id.len() >= 12 && id.bytes().all(|b| b.is_ascii_hexdigit()),
                        "{:?} id {id:?} from {path:?}",
                        c.kind
                    );
                }
            }
        }
        4 => {
            // Container runtimes' JSON and the kubelet's log directory names.
            std::hint::black_box(zone::docker_name(&text));
            std::hint::black_box(zone::storage_name(&text, "3f4e1a2b9c8d"));
            std::hint::black_box(zone::pod_from_log_dirs(
                text.lines(),
                "1a2b3c4d-0000-1111-2222-333344445555",
            ));
        }
        _ => {
            // /proc/net/sockstat and the port sysctls.
            for field in ["tw", "mem", ""] {
                std::hint::black_box(sockstat_wire::snmp::sockstat_tcp_field(&text, field));
            }
            let _ = std::hint::black_box(sockstat_wire::sysctl::port_range(&text));
            let _ = std::hint::black_box(sockstat_wire::sysctl::triple(&text));
            let _ = std::hint::black_box(sockstat_wire::sysctl::number(&text));
            if let Ok(ranges) = sockstat_wire::sysctl::port_list(&text) {
                for w in ranges.windows(2) {
                    assert!(w[0].1 < w[1].0, "port list ranges sorted and merged");
                }
                for &(lo, hi) in &ranges {
                    assert!(lo <= hi);
                }
            }
        }
    }
}

/// The body of the `listing` target: sock_diag replies, decoded and turned into sockets as a
/// dump does, then sorted and written in every format with the options of the first byte, and
/// diagnosed (the first half of the records as the earlier sample). Every other socket gets a
/// holder whose command name and arguments are bytes of its record, so hostile strings reach
/// every renderer. The table must be escaped (no control or bidi character but the line break),
/// the JSON documents must parse, and nothing may panic or overflow. Returns how many sockets
/// were listed (so the replay can check the seeds are real dumps).
pub fn listing(data: &[u8]) -> usize {
    const PROTOS: [Proto; 5] = [
        Proto::Tcp,
        Proto::Udp,
        Proto::Raw,
        Proto::Mptcp,
        Proto::Sctp,
    ];
    let Some((&flags, rest)) = data.split_first() else {
        return 0;
    };
    let mut sockets = Vec::new();
    let mut processes = HashMap::new();
    for (i, msg) in messages(rest).enumerate() {
        let Ok(msg) = msg else { break };
        let Ok(Control::Data(p)) = classify(&msg) else {
            continue;
        };
        let s = match p.first() {
            Some(1) => unix_diag::decode_msg(p).ok().map(|m| socket_from_unix(&m)),
            Some(17) => packet_diag::decode_msg(p)
                .ok()
                .map(|m| socket_from_packet(&m)),
            _ => inet_diag::decode_msg(p)
                .ok()
                .map(|m| socket_from_inet(&m, PROTOS[i % PROTOS.len()])),
        };
        let Some(mut s) = s else { continue };
        if i % 2 == 0 {
            let pid = i as u32 + 1;
            s.owners.push(Owner { pid, fd: i as u32 });
            s.owners_status = OwnersStatus::Known;
            processes.insert(
                pid,
                Process {
                    pid,
                    command: Some(RawString::new(&p[p.len().saturating_sub(15)..])),
                    uid: s.uid,
                    args: Some(vec![RawString::new(p), RawString::new(b"")]),
                },
            );
        }
        sockets.push(s);
    }
    sys::dump::fill_unix_peer_names(&mut sockets);
    let half = sockets.len() / 2;
    let mut snap = Snapshot {
        sockets,
        processes,
        ..Snapshot::default()
    };
    crate::order::sort_sockets(&mut snap.sockets, &snap.zones);

    let mut opts = Options::new();
    opts.tcp = flags & 1 != 0;
    opts.congestion = flags & 2 != 0;
    opts.memory = flags & 4 != 0;
    opts.wide = flags & 8 != 0;
    opts.state = flags & 16 != 0;
    opts.id = flags & 32 != 0;
    opts.args = flags & 64 != 0;
    opts.verbose = flags & 128 != 0;
    let mut out = Vec::new();
    render::table::write(&snap, &opts, &mut out).expect("table into memory");
    let text = std::str::from_utf8(&out).expect("the table is UTF-8");
    for line in text.lines() {
        assert!(
            sanitize::is_printable(line),
            "raw control in the table: {line:?}"
        );
    }
    let json = |out: &[u8], what: &str| {
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(out) {
            panic!("{what} is not JSON ({e}): {}", String::from_utf8_lossy(out));
        }
    };
    out.clear();
    render::json::write(&snap, &opts, &mut out).expect("JSON into memory");
    json(&out, "the listing");
    out.clear();
    render::csv::write(&snap, &opts, &mut out).expect("CSV into memory");
    assert!(std::str::from_utf8(&out).is_ok(), "the CSV is UTF-8");
    out.clear();
    render::summary::write_table(&snap, &opts, &mut out).expect("summary into memory");
    out.clear();
    render::summary::write_json(&snap, &opts, &mut out).expect("summary into memory");
    json(&out, "the summary");

    let snap_len = snap.sockets.len();
    let mut before = snap.clone();
    before.sockets.truncate(half);
    let sample = |snapshot: Snapshot| ZoneSample {
        snapshot,
        ..ZoneSample::default()
    };
    let ctx = Context {
        interval_s: 1.0,
        sysctls: Default::default(),
        bandwidth: (flags & 3 == 3).then_some(12_500_000.0),
        page_size: 4096,
        buf_locks: HashMap::new(),
        connects: None,
    };
    let report = crate::diagnose::diagnose(&sample(before), &sample(snap), &ctx);
    out.clear();
    render::diagnose::write_text(&report, &opts, &mut out).expect("diagnosis into memory");
    for line in std::str::from_utf8(&out).expect("UTF-8").lines() {
        assert!(
            sanitize::is_printable(line),
            "raw control in the diagnosis: {line:?}"
        );
    }
    out.clear();
    render::diagnose::write_json(&report, &opts, &mut out).expect("diagnosis into memory");
    json(&out, "the diagnosis");
    snap_len
}
