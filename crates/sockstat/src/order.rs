//! The listing's order: zone, protocol, family, local and remote ends, then holder and
//! identity, computed as integer keys and sorted in parts (`parallel`). Pure: reads nothing.

use crate::model::{Endpoint, Socket};
use crate::parallel::{cores, par_sort_by, PARALLEL_MAX};

/// The part of the output order that fits in integers: zone rank, protocol and family, and the
/// endpoints where integers decide them: inet addresses and ports (every IPv4 before IPv6, as
/// `IpAddr` orders), and an unnamed unix socket's peer inode. `exact` is false when names must
/// still be compared (a bound unix path or abstract name, packet sockets).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct SortKey {
    head: u64,
    local: u128,
    mid: u32,
    remote: u128,
    tail: u16,
    exact: bool,
}

/// Tag and value of an endpoint in the key; `None` when only the name can order it.
fn endpoint_key(ep: Option<&Endpoint>) -> Option<(u8, u128, u16)> {
    match ep {
        None => Some((0, 0, 0)),
        Some(Endpoint::Inet {
            addr: std::net::IpAddr::V4(a),
            port,
        }) => Some((1, u128::from(u32::from(*a)), *port)),
        Some(Endpoint::Inet {
            addr: std::net::IpAddr::V6(a),
            port,
        }) => Some((2, u128::from(*a), *port)),
        // Endpoint::Unix(None) sorts before any named unix socket.
        Some(Endpoint::Unix(None)) => Some((0, 0, 0)),
        // Peers are ordered by inode first; two sockets with the same peer share its name.
        Some(Endpoint::UnixPeer { peer, .. }) => Some((5, u128::from(*peer), 0)),
        Some(_) => None,
    }
}

impl SortKey {
    /// A 192-bit prefix of the key that orders as the key does wherever it differs (each word
    /// is a non-decreasing image of the key's fields, so equal prefixes are settled by the
    /// whole key): the head; the local end with its port and the remote end's kind; the remote
    /// end with its port. Addresses fit whole where they are small (IPv4, `::1`, `::`,
    /// IPv4-mapped); larger IPv6 addresses keep their leading bits. Named endpoints (tag 0xff)
    /// contribute nothing and go to the whole key.
    fn prefix(&self) -> (u64, u64, u64) {
        let ltag = self.head & 0xff;
        let lport = u64::from(self.mid >> 8);
        let rtag = u64::from(self.mid & 0xff);
        // The local word, and whether it holds the local end whole (then the remote word may
        // order what it leaves equal; if not, the remote word must stay 0).
        let (local, whole) = match ltag {
            // addr (32) | port (16) | remote kind (8)
            1 => (((self.local as u64) << 24) | (lport << 8) | rtag, true),
            2 => v6_image(self.local, lport, 62),
            5 if self.local < (1u128 << 56) => (((self.local as u64) << 8) | rtag, true),
            5 => (u64::MAX, false),
            // No local end, or an unnamed unix socket: nothing to order but the remote end.
            0 => (rtag, true),
            _ => (0, false),
        };
        if !whole {
            return (self.head, local, 0);
        }
        let remote_value = match rtag {
            1 => ((self.remote as u64) << 16) | u64::from(self.tail),
            2 => v6_image(self.remote, u64::from(self.tail), 55).0,
            5 => self.remote.min((1u128 << 56) - 1) as u64,
            _ => 0,
        };
        (self.head, local, (rtag << 56) | remote_value)
    }
}

/// A non-decreasing image of a remote end in the order `Option<Endpoint>` sorts: the kind
/// (none, inet, unix name, unix peer, packet, netlink, unlisted), then a unix peer's inode; what it leaves equal
/// the whole key settles.
fn remote_image(e: Option<&Endpoint>) -> u64 {
    const KIND: u32 = 60;
    match e {
        None => 0,
        Some(Endpoint::Inet { .. }) => 1 << KIND,
        Some(Endpoint::Unix(_)) => 2 << KIND,
        Some(Endpoint::UnixPeer { peer, .. }) => (3 << KIND) | (*peer).min((1 << KIND) - 1),
        Some(Endpoint::Packet { .. }) => 4 << KIND,
        Some(Endpoint::Netlink { .. }) => 5 << KIND,
        Some(Endpoint::Unlisted(_)) => 6 << KIND,
    }
}

/// A non-decreasing image of (IPv6 address, port) in `bits + 1` bits, and whether it is exact:
/// small addresses (`::`, `::1`, IPv4-mapped) whole with the port, in the lower half; others by
/// their leading bits only, in the upper half.
fn v6_image(addr: u128, port: u64, bits: u32) -> (u64, bool) {
    let small = bits - 16;
    if addr < (1u128 << small) {
        (((addr as u64) << 16) | port, true)
    } else {
        ((1u64 << bits) | (addr >> (128 - bits)) as u64, false)
    }
}

fn sort_key(s: &Socket, zone: u32) -> SortKey {
    let head = (u64::from(zone) << 32) | ((s.proto as u64) << 16) | ((s.family as u64) << 8);
    match (
        endpoint_key(Some(&s.local)),
        endpoint_key(s.remote.as_ref()),
    ) {
        (Some(l), Some(r)) => SortKey {
            head: head | u64::from(l.0),
            local: l.1,
            mid: (u32::from(l.2) << 8) | u32::from(r.0),
            remote: r.1,
            tail: r.2,
            exact: true,
        },
        // A named local end: compare the names, then the remote end.
        _ => SortKey {
            head: head | 0xff,
            local: 0,
            mid: 0,
            remote: 0,
            tail: 0,
            exact: false,
        },
    }
}

/// Output order: zone (global first, then by name), protocol, family, local address and port,
/// remote address and port, then the first holder's pid and fd, then identity (so the order is
/// total and stable). Integer keys are computed once per socket and sorted with their index;
/// only bound unix and packet names are compared as endpoints. The permutation is then applied
/// in place, so no second copy of the sockets is made.
pub fn sort_sockets(
    sockets: &mut [Socket],
    zones: &std::collections::BTreeMap<u64, crate::zone::Zone>,
) {
    // Rank zones as they are shown: global first, then by name.
    let mut ranked: Vec<(&u64, &crate::zone::Zone)> = zones.iter().collect();
    ranked.sort_by(|a, b| {
        (a.1.kind != crate::zone::ZoneKind::Global, &a.1.name, a.0).cmp(&(
            b.1.kind != crate::zone::ZoneKind::Global,
            &b.1.name,
            b.0,
        ))
    });
    let rank: std::collections::HashMap<u64, u32> = ranked
        .iter()
        .enumerate()
        .map(|(i, (k, _))| (**k, i as u32 + 1))
        .collect();
    // Sorted as 32-byte items (a 192-bit prefix of the key, and the index) rather than with the
    // whole 64-byte key: at a million sockets that is 32 MB less. Ties on the prefix, which
    // only large IPv6 addresses sharing their leading bits and named endpoints produce, are
    // settled with the whole key.
    //
    // A named local end (a bound unix or packet socket) has no integer image of its own, and
    // many sockets share one (every connection a unix server accepted carries its path): its
    // place among the distinct named ends stands in for it, and the remote end's kind and unix
    // peer inode follow, so that the names are compared once per distinct name, not once per
    // comparison (9 of the sort's 12 ms at 60k sockets, half of them unix).
    let mut named: rustc_hash::FxHashMap<&Endpoint, u64> = sockets
        .iter()
        .filter(|s| {
            endpoint_key(Some(&s.local)).is_none() || endpoint_key(s.remote.as_ref()).is_none()
        })
        .map(|s| (&s.local, 0))
        .collect();
    let mut distinct: Vec<&Endpoint> = named.keys().copied().collect();
    distinct.sort_unstable();
    for (r, e) in distinct.into_iter().enumerate() {
        named.insert(e, r as u64);
    }
    let mut items: Vec<(u64, u64, u64, u32)> = sockets
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let zone = s.netns.and_then(|k| rank.get(&k).copied()).unwrap_or(0);
            let (k0, mut k1, mut k2) = sort_key(s, zone).prefix();
            if k0 & 0xff == 0xff {
                k1 = named.get(&s.local).copied().unwrap_or(u64::MAX);
                k2 = remote_image(s.remote.as_ref());
            }
            (k0, k1, k2, i as u32)
        })
        .collect();
    // In parts from 8192 sockets; past [`PARALLEL_MAX`] in place on one thread, as the merge
    // copies half the items aside (16 MB at a million sockets).
    let parts = if (8192..=PARALLEL_MAX).contains(&items.len()) {
        cores().unwrap_or(1).clamp(1, 4)
    } else {
        1
    };
    par_sort_by(&mut items, parts, |&(a0, a1, a2, i), &(b0, b1, b2, j)| {
        (a0, a1, a2).cmp(&(b0, b1, b2)).then_with(|| {
            let (a, b) = (&sockets[i as usize], &sockets[j as usize]);
            let identity =
                || (a.owners.first(), a.id, a.cookie).cmp(&(b.owners.first(), b.id, b.cookie));
            if a0 & 0xff == 0xff {
                // A named local end (the head's tag): the names decide, then identity.
                return (&a.local, &a.remote)
                    .cmp(&(&b.local, &b.remote))
                    .then_with(identity);
            }
            // The zone rank is the head's top half.
            let (ka, kb) = (
                sort_key(a, (a0 >> 32) as u32),
                sort_key(b, (b0 >> 32) as u32),
            );
            ka.cmp(&kb).then_with(identity)
        })
    });
    let mut order: Vec<u32> = items.into_iter().map(|(_, _, _, i)| i).collect();
    for start in 0..order.len() {
        let mut cur = start;
        while order[cur] as usize != start {
            let next = order[cur] as usize;
            sockets.swap(cur, next);
            order[cur] = cur as u32;
            cur = next;
        }
        order[cur] = cur as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Family, Proto, RawString, SockType, State, UnixName};

    /// Sorting in parts and merging gives what one sort gives, for sizes below, at and past the
    /// parallel threshold, with runs of equal keys (told apart by a second field the comparison
    /// ignores only where it must not matter).
    #[test]
    fn sorting_in_parts_matches_one_sort() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for (n, parts) in [
            (0, 2),
            (1, 2),
            (100, 3),
            (8191, 1),
            (8192, 2),
            (20_001, 2),
            (20_001, 3),
            (20_001, 4),
            (7, 5),
        ] {
            let items: Vec<(u64, u32)> = (0..n as u32)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 5000, i)
                })
                .collect();
            let mut sorted = items.clone();
            par_sort_by(&mut sorted, parts, |a, b| a.cmp(b));
            let mut one = items;
            one.sort_unstable();
            assert!(sorted == one, "{n} items in {parts} parts");
        }
    }

    fn sock(
        proto: Proto,
        family: Family,
        local: Endpoint,
        remote: Option<Endpoint>,
        id: u64,
    ) -> Socket {
        Socket {
            id: Some(id),
            cookie: Some(id),
            ..Socket::new(
                proto,
                family,
                SockType::Stream,
                State::Established,
                local,
                remote,
            )
        }
    }

    fn inet(a: &str, port: u16) -> Endpoint {
        Endpoint::Inet {
            addr: a.parse().unwrap(),
            port,
        }
    }

    /// Sorts `v` with `sort_sockets` and by comparing the fields themselves; the orders must
    /// be the same.
    fn assert_sorts_like_the_fields(mut v: Vec<Socket>) {
        let mut plain = v.clone();
        plain.sort_by(|a, b| {
            (a.proto, a.family, &a.local, &a.remote, a.id)
                .cmp(&(b.proto, b.family, &b.local, &b.remote, b.id))
        });
        sort_sockets(&mut v, &std::collections::BTreeMap::new());
        if let Some(k) = (0..v.len()).find(|&k| v[k].id != plain[k].id) {
            panic!(
                "at {k}: sorted {:?} {:?} {:?} {:?}, expected {:?} {:?} {:?} {:?}",
                v[k].proto,
                v[k].family,
                v[k].local,
                v[k].remote,
                plain[k].proto,
                plain[k].family,
                plain[k].local,
                plain[k].remote
            );
        }
    }

    /// The integer keys must order exactly as comparing the fields themselves does.
    #[test]
    fn keyed_sort_equals_the_plain_comparison() {
        let mut v = Vec::new();
        let addrs = [
            "127.0.0.1",
            "10.0.0.2",
            "0.0.0.0",
            "::1",
            "2001:db8::1",
            // Same first 64 bits as the one above: the sort prefix ties, the whole key decides.
            "2001:db8::2",
            "2001:db8::1:0:0:5",
            "::ffff:127.0.0.1",
            "::",
            "255.255.255.255",
        ];
        let mut id = 1;
        for (i, a) in addrs.iter().enumerate() {
            for b in [None, Some(addrs[(i + 3) % addrs.len()])] {
                for port in [0u16, 80, 65535] {
                    let fam = if a.contains(':') {
                        Family::Inet6
                    } else {
                        Family::Inet
                    };
                    for proto in [Proto::Tcp, Proto::Udp] {
                        v.push(sock(proto, fam, inet(a, port), b.map(|x| inet(x, 443)), id));
                        id += 1;
                    }
                }
            }
        }
        for name in [None, Some("/run/a"), Some("/run/b"), Some("@abs")] {
            // Accepted sockets share the listener's path; dgram clients share one peer.
            for peer in [None, Some(7u64), Some(3), Some(7), Some(9)] {
                let local =
                    Endpoint::Unix(name.map(|n| UnixName::Path(RawString::new(n.as_bytes()))));
                let remote = peer.map(|p| Endpoint::UnixPeer {
                    peer: p,
                    name: None,
                });
                v.push(sock(Proto::Unix, Family::Unix, local, remote, id));
                id += 1;
            }
        }
        // A deterministic shuffle.
        let n = v.len();
        for i in 0..n {
            v.swap(i, (i * 7919 + 13) % n);
        }
        assert_sorts_like_the_fields(v);
    }

    /// The same, on many random sockets drawn so that prefixes tie often: IPv6 addresses that
    /// share their leading bits, small and large ones, shared ports, unix peers with inodes
    /// beyond 2^56. A prefix that is not an order-preserving image of the key fails here.
    #[test]
    fn keyed_sort_equals_the_plain_comparison_at_random() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let v4 = [
            "127.0.0.1",
            "127.0.0.2",
            "10.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
        ];
        let v6 = [
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::2:0:0:1",
            "2001:db8::1",
            "2001:db8::2",
            "2001:db8::1:0:0:1",
            "fe80::1",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ];
        let ports = [0u16, 1, 80, 443, 8080, 65535];
        let mut v = Vec::new();
        // Past the size sorted in parts, so the merge is checked too.
        for id in 1..=12_000u64 {
            let r = next();
            let s = match r % 4 {
                0 | 1 => {
                    let six = r % 4 == 1;
                    let pick = |x: u64| -> &str {
                        if six {
                            v6[(x % v6.len() as u64) as usize]
                        } else {
                            v4[(x % v4.len() as u64) as usize]
                        }
                    };
                    let local = inet(pick(next()), ports[(next() % 6) as usize]);
                    let remote =
                        (next() % 3 != 0).then(|| inet(pick(next()), ports[(next() % 6) as usize]));
                    let fam = if six { Family::Inet6 } else { Family::Inet };
                    let proto = if next() % 2 == 0 {
                        Proto::Tcp
                    } else {
                        Proto::Udp
                    };
                    sock(proto, fam, local, remote, id)
                }
                _ => {
                    let inode = |x: u64| match x % 4 {
                        0 => x % 50,
                        1 => (1u64 << 56) + x % 3,
                        2 => u64::MAX - x % 3,
                        _ => 1000 + x % 7,
                    };
                    // Names sharing long prefixes, as paths in one directory do.
                    let names = ["/run/sock/a", "/run/sock/ab", "/run/sock/b", "/run/"];
                    let name = |x: u64| {
                        let n = RawString::new(names[(x % 4) as usize].as_bytes());
                        if x % 5 == 0 {
                            UnixName::Abstract(n)
                        } else {
                            UnixName::Path(n)
                        }
                    };
                    // The ends the dump produces: a unix socket's own name (none, a path,
                    // an abstract name) and its peer; a packet socket's protocol and
                    // interface, with no remote end.
                    if next() % 5 == 0 {
                        let local = Endpoint::Packet {
                            protocol: (next() % 3) as u16,
                            ifindex: (next() % 2) as u32,
                        };
                        sock(Proto::Packet, Family::Packet, local, None, id)
                    } else {
                        let local = match next() % 3 {
                            0 => Endpoint::Unix(None),
                            _ => Endpoint::Unix(Some(name(next()))),
                        };
                        // A peer's name is the peer's: the same for every socket it serves.
                        let remote = (next() % 3 != 0).then(|| {
                            let peer = inode(next());
                            Endpoint::UnixPeer {
                                peer,
                                name: (peer % 2 == 0).then(|| name(peer / 2)),
                            }
                        });
                        sock(Proto::Unix, Family::Unix, local, remote, id)
                    }
                }
            };
            v.push(s);
        }
        assert_sorts_like_the_fields(v);
    }
}
