//! Loads the `sockstat drops` program (`sockstat_wire::skb_drops`: `tp_btf/kfree_skb`, which
//! counts dropped packets by reason, protocol and port in a kernel hash map) and reads what it
//! counted. The map holds at most [`DROPS_MAX`] distinct (reason, protocol, port) keys; a drop
//! that finds it full is counted apart, so the total stays exact.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use sockstat_wire::btf::Btf;
use sockstat_wire::skb_drops::{self, Key, Layout, KEY_LEN};
use sockstat_wire::tcp_events::{COUNTERS_LEN, DROPS_UNCOUNTED};

use super::bpf::{self, MapSpec, ProgSpec};
use super::tcp_events::Unavailable;
use crate::events::drops::{DropCount, Drops, PortFrom};

/// Distinct (reason, protocol, port) keys the kernel map holds.
pub const DROPS_MAX: u32 = 4096;

fn unavailable(step: &str, e: &io::Error) -> Unavailable {
    let hint = bpf::explain(e);
    Unavailable {
        message: if hint.is_empty() {
            format!("{step}: {e}")
        } else {
            format!("{step}: {e} ({hint})")
        },
        privilege: matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)),
    }
}

/// The drop counter: the program attached, the map filling.
pub struct DropCounter {
    layout: Layout,
    map: OwnedFd,
    counters: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    started: Instant,
    /// How long loading took.
    pub load_time: Duration,
}

impl DropCounter {
    /// Loads and attaches the program.
    pub fn start() -> Result<DropCounter, Unavailable> {
        let t0 = Instant::now();
        let data = super::bpf::kernel_btf().map_err(|e| Unavailable {
            message: super::bpf::btf_unreadable(&e),
            privilege: false,
        })?;
        let btf = Btf::parse(&data).map_err(|e| Unavailable {
            message: format!("{}: {e}", super::bpf::VMLINUX_BTF),
            privilege: false,
        })?;
        let layout = Layout::from_btf(&btf).map_err(|message| Unavailable {
            message,
            privilege: false,
        })?;
        drop(btf);
        drop(data);
        let map = bpf::map_create(&MapSpec {
            map_type: bpf::MAP_TYPE_HASH,
            key_size: KEY_LEN,
            value_size: 8,
            max_entries: DROPS_MAX,
            flags: 0,
            name: "sockstat_drops",
        })
        .map_err(|e| unavailable("creating the drops map", &e))?;
        let counters = bpf::map_create(&MapSpec {
            map_type: bpf::MAP_TYPE_ARRAY,
            key_size: 4,
            value_size: COUNTERS_LEN,
            max_entries: 1,
            flags: 0,
            name: "sockstat_dcount",
        })
        .map_err(|e| unavailable("creating the counters map", &e))?;
        let code =
            skb_drops::program(&layout, map.as_raw_fd(), counters.as_raw_fd()).map_err(|e| {
                Unavailable {
                    message: format!("assembling the drops program: {e}"),
                    privilege: false,
                }
            })?;
        let prog = bpf::prog_load(&ProgSpec {
            prog_type: bpf::PROG_TYPE_TRACING,
            attach_type: bpf::TRACE_RAW_TP,
            attach_btf_id: layout.btf_id,
            code: &code,
            name: "sockstat_drops",
        })
        .map_err(|e| {
            let mut u = unavailable("loading the tp_btf/kfree_skb program", &e.error);
            if !e.verifier.is_empty() {
                u.message.push_str("; verifier: ");
                u.message.push_str(&e.verifier);
            }
            u
        })?;
        let link = bpf::attach_tracing(&prog)
            .map_err(|e| unavailable("attaching to the skb:kfree_skb tracepoint", &e))?;
        Ok(DropCounter {
            layout,
            map,
            counters,
            _prog: prog,
            _link: link,
            started: Instant::now(),
            load_time: t0.elapsed(),
        })
    }

    /// Everything counted since [`DropCounter::start`].
    pub fn read(&self) -> io::Result<Drops> {
        let mut counts = Vec::new();
        let mut key = [0u8; KEY_LEN as usize];
        let mut next = [0u8; KEY_LEN as usize];
        let mut first = true;
        while bpf::map_next_key(&self.map, (!first).then_some(&key[..]), &mut next)? {
            first = false;
            key = next;
            let mut v = [0u8; 8];
            if !bpf::map_lookup(&self.map, &key, &mut v)? {
                continue;
            }
            let Some(k) = Key::parse(&key) else { continue };
            counts.push(DropCount {
                reason: self.layout.reason_name(k.reason),
                proto: k.proto,
                port: k.port.map(|(p, how)| {
                    (
                        p,
                        if how == skb_drops::how::SOCKET {
                            PortFrom::Socket
                        } else {
                            PortFrom::PacketDestination
                        },
                    )
                }),
                count: u64::from_ne_bytes(v),
            });
        }
        let mut c = [0u8; COUNTERS_LEN as usize];
        bpf::map_lookup(&self.counters, &0u32.to_ne_bytes(), &mut c)?;
        let at = DROPS_UNCOUNTED as usize * 8;
        let uncounted = c
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_ne_bytes);
        Ok(Drops::new(counts, uncounted, self.started.elapsed()))
    }
}
