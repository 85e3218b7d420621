//! Who may hold a connection: at most [`MAX_CONNECTIONS`] at once, at most [`PER_PEER`] from
//! one client address (an IPv4 address, or an IPv6 /64, which one host usually holds whole).
//!
//! A connection moves through three stages: [`Stage::Incomplete`] until its TLS handshake and
//! request head are in, [`Stage::Unauthenticated`] while its credentials are checked or
//! refused, [`Stage::Trusted`] once the configured authentication passed (or, with none
//! configured, once its request is complete). When a new connection finds its address's share
//! or the whole pool taken, it takes the place of an incomplete connection (of its own address
//! first), else of an unauthenticated one: the one whose address holds the most places, the
//! oldest of those. The one evicted is shut down (its thread sees the end of the stream and
//! leaves). A trusted connection is never evicted; each stage has a deadline
//! (`crate::http`), so none holds its place for long. So a client that opens connections and
//! sends nothing, or trickles its request, cannot keep Prometheus out: it holds at most
//! [`PER_PEER`] places, and a complete, authenticated request is never the one pushed out.

use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Connections one client address may hold at once.
pub const PER_PEER: usize = 8;

/// A client address as the limits count it: an IPv4 address (also when mapped into IPv6), or
/// the /64 prefix of an IPv6 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    V4([u8; 4]),
    V6Prefix([u8; 8]),
}

impl Peer {
    pub fn of(ip: IpAddr) -> Peer {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Peer::V4(v4.octets()),
            IpAddr::V6(v6) => {
                let mut p = [0u8; 8];
                p.copy_from_slice(&v6.octets()[..8]);
                Peer::V6Prefix(p)
            }
        }
    }
}

/// How far a connection got; a later stage is never evicted before an earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Connected; the TLS handshake or the request head is not complete.
    Incomplete,
    /// The request is complete; its credentials are being checked, or were refused and the
    /// refusal is being written.
    Unauthenticated,
    /// Authenticated (or nothing to authenticate): never evicted.
    Trusted,
}

struct Slot {
    id: u64,
    peer: Peer,
    stage: Stage,
    since: Instant,
    /// A handle on the connection's socket, to shut it down when it is evicted.
    socket: TcpStream,
}

/// The connections being served.
#[derive(Default)]
pub struct Pool {
    slots: Mutex<Vec<Slot>>,
    next_id: std::sync::atomic::AtomicU64,
}

/// A connection's place in the pool; leaving it (drop) frees the place.
pub struct Ticket {
    pool: Arc<Pool>,
    id: u64,
}

/// What happened to a new connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// Given a free place.
    Admitted,
    /// Given the place of an evicted connection, which was shut down.
    Evicted(Stage),
    /// No place: every connection that could be evicted is trusted.
    Refused,
}

impl Pool {
    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gives a connection from `peer` (whose socket is `socket`) a place, evicting another if
    /// it must; `None` when there is no place for it.
    pub fn admit(self: &Arc<Self>, peer: Peer, socket: &TcpStream) -> (Option<Ticket>, Admission) {
        let Ok(handle) = socket.try_clone() else {
            return (None, Admission::Refused);
        };
        let mut slots = self.slots();
        let mine = slots.iter().filter(|s| s.peer == peer).count();
        let victim = if mine >= PER_PEER {
            // Its own address's share is taken: the oldest of its own that is not trusted.
            slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.peer == peer && s.stage < Stage::Trusted)
                .min_by_key(|(_, s)| (s.stage, s.since))
                .map(|(i, _)| i)
                .ok_or(())
        } else if slots.len() >= MAX_CONNECTIONS {
            victim(&slots).ok_or(())
        } else {
            Err(())
        };
        let admission = match victim {
            Ok(i) => {
                let v = slots.swap_remove(i);
                let _ = v.socket.shutdown(Shutdown::Both);
                Admission::Evicted(v.stage)
            }
            Err(()) if mine >= PER_PEER || slots.len() >= MAX_CONNECTIONS => {
                return (None, Admission::Refused);
            }
            Err(()) => Admission::Admitted,
        };
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        slots.push(Slot {
            id,
            peer,
            stage: Stage::Incomplete,
            since: Instant::now(),
            socket: handle,
        });
        (
            Some(Ticket {
                pool: Arc::clone(self),
                id,
            }),
            admission,
        )
    }

    /// Connections held now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.slots().len()
    }
}

/// The connection to evict from a full pool: of the earliest stage present below trusted, from
/// the address holding the most connections of that stage, the oldest.
fn victim(slots: &[Slot]) -> Option<usize> {
    let stage = slots
        .iter()
        .map(|s| s.stage)
        .filter(|s| *s < Stage::Trusted)
        .min()?;
    let mut per_peer: std::collections::HashMap<Peer, usize> = std::collections::HashMap::new();
    for s in slots.iter().filter(|s| s.stage == stage) {
        *per_peer.entry(s.peer).or_default() += 1;
    }
    slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.stage == stage)
        .min_by_key(|(_, s)| (std::cmp::Reverse(per_peer[&s.peer]), s.since))
        .map(|(i, _)| i)
}

impl Ticket {
    /// The connection reached `stage`. False when it was evicted meanwhile (its socket is shut
    /// down: stop).
    pub fn advance(&self, stage: Stage) -> bool {
        let mut slots = self.pool.slots();
        match slots.iter_mut().find(|s| s.id == self.id) {
            Some(s) => {
                s.stage = s.stage.max(stage);
                true
            }
            None => false,
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut slots = self.pool.slots();
        if let Some(i) = slots.iter().position(|s| s.id == self.id) {
            slots.swap_remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;
    use std::net::TcpListener;

    /// A connected pair on loopback: (the server's end, the client's end).
    fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (server, client)
    }

    fn peer(ip: &str) -> Peer {
        Peer::of(ip.parse().unwrap())
    }

    #[test]
    fn peers_are_ipv4_addresses_and_ipv6_64s() {
        assert_eq!(peer("192.0.2.1"), peer("::ffff:192.0.2.1"));
        assert_ne!(peer("192.0.2.1"), peer("192.0.2.2"));
        assert_eq!(peer("2001:db8:1:2::1"), peer("2001:db8:1:2:ffff::9"));
        assert_ne!(peer("2001:db8:1:2::1"), peer("2001:db8:1:3::1"));
    }

    /// One address fills its share with incomplete connections: its next connection takes the
    /// place of its oldest, which is shut down; another address is admitted beside them.
    #[test]
    fn an_address_over_its_share_evicts_its_own_oldest_incomplete_connection() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let pool = Arc::new(Pool::default());
        let a = peer("192.0.2.1");
        let mut held = Vec::new();
        for _ in 0..PER_PEER {
            let (server, client) = pair(&l);
            let (t, adm) = pool.admit(a, &server);
            assert_eq!(adm, Admission::Admitted);
            held.push((t.unwrap(), server, client));
        }
        let (server, _client) = pair(&l);
        let (t, adm) = pool.admit(a, &server);
        assert_eq!(adm, Admission::Evicted(Stage::Incomplete));
        assert!(t.is_some());
        assert_eq!(pool.len(), PER_PEER);
        // The first one was shut down: its client reads the end of the stream, and its ticket
        // knows it was evicted.
        let (t0, _, mut c0) = held.remove(0);
        let mut b = [0u8; 1];
        assert_eq!(c0.read(&mut b).unwrap(), 0);
        assert!(!t0.advance(Stage::Trusted));
        // Trusted connections of that address are never evicted: with all of its share trusted,
        // a further connection from it is refused.
        for (t, _, _) in &held {
            assert!(t.advance(Stage::Trusted));
        }
        let t = t.unwrap();
        assert!(t.advance(Stage::Trusted));
        let (server, _c) = pair(&l);
        assert_eq!(pool.admit(a, &server).1, Admission::Refused);
        let (server, _c) = pair(&l);
        assert_eq!(
            pool.admit(peer("192.0.2.2"), &server).1,
            Admission::Admitted
        );
    }

    /// A full pool evicts incomplete connections before unauthenticated ones, from the address
    /// holding the most; trusted ones never.
    #[test]
    fn a_full_pool_evicts_the_earliest_stage_of_the_biggest_holder() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let pool = Arc::new(Pool::default());
        let mut held = Vec::new();
        // MAX_CONNECTIONS places over addresses .1 to .8 (8 each); .1's are trusted, .2's
        // unauthenticated, the rest incomplete; .3 holds its 8, the others fewer.
        let mut n = 0;
        for host in 1..=MAX_CONNECTIONS / PER_PEER {
            for _ in 0..PER_PEER {
                let (server, client) = pair(&l);
                let (t, adm) = pool.admit(peer(&format!("198.51.100.{host}")), &server);
                assert_eq!(adm, Admission::Admitted);
                let t = t.unwrap();
                match host {
                    1 => assert!(t.advance(Stage::Trusted)),
                    2 => assert!(t.advance(Stage::Unauthenticated)),
                    _ => {}
                }
                held.push((host, t, server, client));
                n += 1;
            }
        }
        assert_eq!(n, MAX_CONNECTIONS);
        // Give .4 ... .8 one place less each, so .3 holds the most incomplete connections.
        for host in 4..=MAX_CONNECTIONS / PER_PEER {
            let i = held.iter().position(|h| h.0 == host).unwrap();
            held.remove(i);
        }
        // Fill the pool again from a new address: these take free places.
        let newcomer = peer("203.0.113.1");
        let mut mine = Vec::new();
        while pool.len() < MAX_CONNECTIONS {
            let (server, c) = pair(&l);
            let (t, adm) = pool.admit(newcomer, &server);
            assert_eq!(adm, Admission::Admitted);
            mine.push((t.unwrap(), server, c));
        }
        // Full: the next newcomer evicts one of .3's incomplete connections.
        let (server, _c) = pair(&l);
        let (t_new, adm) = pool.admit(peer("203.0.113.2"), &server);
        assert_eq!(adm, Admission::Evicted(Stage::Incomplete));
        let t_new = t_new.unwrap();
        assert!(t_new.advance(Stage::Trusted));
        let gone: Vec<_> = held
            .iter()
            .filter(|h| !h.1.advance(Stage::Incomplete))
            .map(|h| h.0)
            .collect();
        assert_eq!(gone, vec![3]);
        // With every incomplete connection trusted, the unauthenticated ones (.2) go next.
        for h in &held {
            if h.0 >= 3 {
                h.1.advance(Stage::Trusted);
            }
        }
        for (t, _, _) in &mine {
            t.advance(Stage::Trusted);
        }
        let (server, _c2) = pair(&l);
        let (_t2, adm) = pool.admit(peer("203.0.113.3"), &server);
        assert_eq!(adm, Admission::Evicted(Stage::Unauthenticated));
    }
}
