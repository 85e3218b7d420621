//! The drops use case (`sockstat drops`, the exporter's drop metrics): the counter that loads
//! the probe and reads its map, and [`count`], the drops of an interval the filters select.
//! The counts are [`crate::events::drops`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use crate::sys::skb_drops::{DropCounter, DROPS_MAX};

use crate::events::drops::Drops;
use crate::model::Proto;
use crate::query::PortSet;

/// The IP protocol number drops of kind `p` are counted under, for the kinds a drop can be
/// told by (tcp, udp, udplite, sctp).
pub fn ip_protocol(p: Proto) -> Option<u8> {
    match p {
        Proto::Tcp => Some(6),
        Proto::Udp => Some(17),
        Proto::Udplite => Some(136),
        Proto::Sctp => Some(132),
        _ => None,
    }
}

/// The drops `counter` counts over `how_long` (or until `stop` is set), of the IP protocols
/// `protos` ([`ip_protocol`]) and the ports `ports` when given.
pub fn count(
    counter: &DropCounter,
    how_long: Duration,
    stop: &AtomicBool,
    protos: Option<&[u8]>,
    ports: Option<&PortSet>,
) -> std::io::Result<Drops> {
    let until = Instant::now() + how_long;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        std::thread::sleep(
            Duration::from_millis(50).min(until.saturating_duration_since(Instant::now())),
        );
    }
    let mut drops = counter.read()?;
    drops.retain(protos, ports);
    Ok(drops)
}
