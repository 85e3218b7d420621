//! Packets the kernel dropped, by reason (`enum skb_drop_reason`), protocol and port, over an
//! interval: what `sockstat drops` shows. Counted in the kernel by the use case's
//! `crate::run::drops::DropCounter`.

use std::time::Duration;

/// Where a drop's port came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PortFrom {
    /// The local port of the socket the packet was for.
    Socket,
    /// The destination port in the packet's header (no socket was known).
    PacketDestination,
}

impl PortFrom {
    /// The name in JSON.
    pub fn name(self) -> &'static str {
        match self {
            PortFrom::Socket => "socket",
            PortFrom::PacketDestination => "packet-destination",
        }
    }
}

/// One (reason, protocol, port) and how many packets it dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropCount {
    /// The kernel's drop reason, without its `SKB_DROP_REASON_` prefix (`NO_SOCKET`).
    pub reason: String,
    /// IP protocol number (6 TCP, 17 UDP); 0 when it could not be read.
    pub proto: u8,
    /// The port and where it came from.
    pub port: Option<(u16, PortFrom)>,
    /// Packets.
    pub count: u64,
}

impl DropCount {
    /// `tcp`, `udp`, `icmp`, ..., or the number; `?` when unknown.
    pub fn proto_name(&self) -> String {
        match self.proto {
            0 => "?".into(),
            1 => "icmp".into(),
            6 => "tcp".into(),
            17 => "udp".into(),
            58 => "icmpv6".into(),
            132 => "sctp".into(),
            n => n.to_string(),
        }
    }
}

/// Drops over an interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drops {
    /// Most first, then by reason, protocol and port.
    pub counts: Vec<DropCount>,
    /// Drops not broken down because the kernel map was full (they are in no row).
    pub uncounted: u64,
    /// The interval.
    pub interval: Duration,
}

impl Drops {
    /// Sorts the counts (most first).
    pub fn new(mut counts: Vec<DropCount>, uncounted: u64, interval: Duration) -> Drops {
        counts.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| a.reason.cmp(&b.reason))
                .then(a.proto.cmp(&b.proto))
                .then(a.port.cmp(&b.port))
        });
        Drops {
            counts,
            uncounted,
            interval,
        }
    }

    /// Every drop, the uncounted included.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|c| c.count).sum::<u64>() + self.uncounted
    }

    /// Keeps the TCP and UDP drops of the ports in `keep` (the protocol filter keeps unknown
    /// protocols out; the port filter keeps drops with no port out).
    pub fn retain(&mut self, protos: Option<&[u8]>, ports: Option<&crate::query::PortSet>) {
        self.counts.retain(|c| {
            protos.is_none_or(|p| p.contains(&c.proto))
                && ports.is_none_or(|set| c.port.is_some_and(|(p, _)| set.contains(p)))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(reason: &str, proto: u8, port: Option<u16>, count: u64) -> DropCount {
        DropCount {
            reason: reason.into(),
            proto,
            port: port.map(|p| (p, PortFrom::Socket)),
            count,
        }
    }

    #[test]
    fn sorted_filtered_and_totalled() {
        let mut d = Drops::new(
            vec![
                c("NO_SOCKET", 6, Some(9), 3),
                c("NETFILTER_DROP", 6, Some(47001), 12),
                c("NOT_SPECIFIED", 0, None, 40),
                c("SOCKET_RCVBUFF", 17, Some(53), 12),
            ],
            5,
            Duration::from_secs(10),
        );
        assert_eq!(d.counts[0].reason, "NOT_SPECIFIED");
        assert_eq!(d.counts[1].reason, "NETFILTER_DROP");
        assert_eq!(d.total(), 72);
        d.retain(Some(&[6, 17]), None);
        assert_eq!(d.counts.len(), 3);
        d.retain(None, Some(&crate::PortSet::parse("47001,53").unwrap()));
        assert_eq!(d.counts.len(), 2);
        assert_eq!(d.counts[1].proto_name(), "udp");
    }
}
