//! Who opened the connections to each destination: the processes behind the connect() calls
//! seen as events over an interval, for `sockstat ports --interval` ("who is burning my
//! ports"). A TIME-WAIT entry has no owner and a short connection is gone before any poll;
//! connection events name the process that made each one.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use super::{ConnEvent, EventKind, Side};
use crate::model::RawString;
pub use crate::ports::Opener;
use crate::ports::PortsReport;

/// Destinations followed (the rest are counted in [`Openers::dropped`]).
pub const MAX_DESTINATIONS: usize = 10_000;
/// Processes named per destination (the rest are summed as `more`).
pub const MAX_PER_DESTINATION: usize = 16;

/// (netns, local address, remote address, remote port).
type DestKey = (u64, IpAddr, IpAddr, u16);
/// (pid, command) -> (connects, of which failed).
type ByProcess = BTreeMap<(u32, RawString), (u64, u64)>;

/// connect() calls by destination and process, from connection events.
#[derive(Debug, Default)]
pub struct Openers {
    by_dest: HashMap<DestKey, ByProcess>,
    /// Connects not counted because [`MAX_DESTINATIONS`] destinations were already followed.
    pub dropped: u64,
}

impl Openers {
    /// Counts a client `connect` or `failed` event (others are ignored).
    pub fn add(&mut self, e: &ConnEvent) {
        if e.side != Some(Side::Client) || !matches!(e.kind, EventKind::Connect | EventKind::Failed)
        {
            return;
        }
        let Some(p) = &e.process else { return };
        let key = (e.netns, e.local.ip(), e.remote.ip(), e.remote.port());
        if !self.by_dest.contains_key(&key) && self.by_dest.len() >= MAX_DESTINATIONS {
            self.dropped += 1;
            return;
        }
        let n = self
            .by_dest
            .entry(key)
            .or_default()
            .entry((p.pid, p.command.clone()))
            .or_default();
        n.0 += 1;
        if e.kind == EventKind::Failed {
            n.1 += 1;
        }
    }

    /// The processes that opened connections from `local` to `remote:port` in namespace
    /// `netns`, most first (at most [`MAX_PER_DESTINATION`], then one `(more)` entry with pid 0
    /// summing the rest).
    pub fn of(&self, netns: u64, local: IpAddr, remote: IpAddr, port: u16) -> Vec<Opener> {
        let Some(m) = self.by_dest.get(&(netns, local, remote, port)) else {
            return Vec::new();
        };
        let mut v: Vec<Opener> = m
            .iter()
            .map(|((pid, cmd), (n, failed))| Opener {
                pid: *pid,
                command: cmd.to_string_lossy().into_owned(),
                connections: *n,
                failed: *failed,
            })
            .collect();
        v.sort_by(|a, b| b.connections.cmp(&a.connections).then(a.pid.cmp(&b.pid)));
        if v.len() > MAX_PER_DESTINATION {
            let rest = v.split_off(MAX_PER_DESTINATION);
            v.push(Opener {
                pid: 0,
                command: "(more)".into(),
                connections: rest.iter().map(|o| o.connections).sum(),
                failed: rest.iter().map(|o| o.failed).sum(),
            });
        }
        v
    }

    /// Names, on every destination of `report` (a report of namespace `netns`), the processes
    /// that opened connections to it. Destinations no event was seen for get an empty list:
    /// their sockets were opened before the interval.
    pub fn attach(&self, report: &mut PortsReport, netns: u64) {
        for d in &mut report.destinations {
            d.opened_by = Some(self.of(netns, d.local_address, d.remote_address, d.remote_port));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::tests::record;
    use crate::events::Clock;
    use sockstat_wire::tcp_events::{kind, side, state};

    #[test]
    fn counts_connects_and_failures_by_process() {
        let c = Clock::fixed(0);
        let mut o = Openers::default();
        for _ in 0..3 {
            o.add(
                &ConnEvent::from_record(&record(kind::CONNECT, state::SYN_SENT, side::CLIENT), &c)
                    .unwrap(),
            );
        }
        let mut f = record(kind::CLOSE, state::SYN_SENT, side::CLIENT);
        f.sk_err = 111;
        o.add(&ConnEvent::from_record(&f, &c).unwrap());
        // Closes and server events are not connects.
        o.add(
            &ConnEvent::from_record(&record(kind::CLOSE, state::FIN_WAIT2, side::CLIENT), &c)
                .unwrap(),
        );
        o.add(
            &ConnEvent::from_record(&record(kind::ACCEPT, state::ESTABLISHED, side::SERVER), &c)
                .unwrap(),
        );
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let v = o.of(4026531840, lo, lo, 47001);
        assert_eq!(
            v,
            vec![Opener {
                pid: 5446,
                command: "python3".into(),
                connections: 4,
                failed: 1
            }]
        );
        assert!(o.of(1, lo, lo, 47001).is_empty());
    }

    #[test]
    fn bounded_per_destination() {
        let c = Clock::fixed(0);
        let mut o = Openers::default();
        for pid in 0..(MAX_PER_DESTINATION as u32 + 4) {
            let mut r = record(kind::CONNECT, state::SYN_SENT, side::CLIENT);
            r.pid = 100 + pid;
            o.add(&ConnEvent::from_record(&r, &c).unwrap());
        }
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let v = o.of(4026531840, lo, lo, 47001);
        assert_eq!(v.len(), MAX_PER_DESTINATION + 1);
        assert_eq!(v.last().unwrap().command, "(more)");
        assert_eq!(v.last().unwrap().connections, 4);
    }
}
