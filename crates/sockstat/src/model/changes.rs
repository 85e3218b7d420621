//! What changed between two snapshots: the sockets that opened and closed (what
//! `sockstat --events` prints). Pure: compares two finished snapshots.

use std::collections::HashMap;

use super::{Endpoint, OwnersStatus, Proto, Snapshot, Socket};

/// What identifies one socket across snapshots: the kernel's socket cookie, or, from the /proc
/// fallback (no cookies), the protocol, both addresses, the inode and the namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SocketKey {
    /// `INET_DIAG_ID`/`UNIX_DIAG` cookie: unique on the host for the socket's lifetime.
    Cookie(u64),
    /// No cookie: the tuple.
    Tuple {
        /// Protocol.
        proto: Proto,
        /// Local end.
        local: Endpoint,
        /// Remote end.
        remote: Option<Endpoint>,
        /// Inode (`None` for TIME_WAIT and request sockets).
        id: Option<u64>,
        /// Network namespace key, when zones were read.
        netns: Option<u64>,
    },
}

impl SocketKey {
    /// The key of one socket.
    pub fn of(s: &Socket) -> SocketKey {
        match s.cookie {
            Some(c) => SocketKey::Cookie(c),
            None => SocketKey::Tuple {
                proto: s.proto,
                local: s.local.clone(),
                remote: s.remote.clone(),
                id: s.id,
                netns: s.netns,
            },
        }
    }
}

/// What changed between two snapshots, as indices into their `sockets`, in each snapshot's
/// own order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    /// Sockets of the newer snapshot that the older did not have.
    pub opened: Vec<usize>,
    /// Sockets of the older snapshot that the newer no longer has.
    pub closed: Vec<usize>,
}

impl Changes {
    /// True when no socket opened or closed.
    pub fn is_empty(&self) -> bool {
        self.opened.is_empty() && self.closed.is_empty()
    }
}

/// The sockets that appeared (`opened`, indices into `next`) and disappeared (`closed`,
/// indices into `prev`). A socket is the same socket while its [`SocketKey`] is the same, so a
/// listener closed and reopened on the same port between the two is one close and one open.
///
/// ```
/// use std::time::Duration;
///
/// let q = sockstat::Query::new();
/// let before = sockstat::collect(&q)?;
/// std::thread::sleep(Duration::from_millis(100));
/// let mut after = sockstat::collect(&q)?;
/// // A socket whose process exited between the two looks unowned in `after`: name its holder.
/// sockstat::model::carry_owners(&before, &mut after);
/// let changes = sockstat::model::diff(&before, &after);
/// for &i in &changes.closed {
///     println!("closed: {:?}", before.sockets[i].local);
/// }
/// for &i in &changes.opened {
///     println!("opened: {:?}", after.sockets[i].local);
/// }
/// # Ok::<(), sockstat::Error>(())
/// ```
pub fn diff(prev: &Snapshot, next: &Snapshot) -> Changes {
    let keys = |s: &Snapshot| -> HashMap<SocketKey, usize> {
        s.sockets
            .iter()
            .enumerate()
            .map(|(i, x)| (SocketKey::of(x), i))
            .collect()
    };
    let (before, after) = (keys(prev), keys(next));
    Changes {
        opened: (0..next.sockets.len())
            .filter(|&i| !before.contains_key(&SocketKey::of(&next.sockets[i])))
            .collect(),
        closed: (0..prev.sockets.len())
            .filter(|&i| !after.contains_key(&SocketKey::of(&prev.sockets[i])))
            .collect(),
    }
}

/// Gives each socket of `next` that has no holder left but had one in `prev` the holders it
/// had (with their process and user records). A process that exits loses its fd table before
/// the kernel frees its sockets, so the last snapshot before a close often sees the socket
/// unowned; the close should still name who held it. Call it before `next` becomes the `prev`
/// of the following [`diff`].
pub fn carry_owners(prev: &Snapshot, next: &mut Snapshot) {
    let before: HashMap<SocketKey, usize> = prev
        .sockets
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.owners.is_empty())
        .map(|(i, s)| (SocketKey::of(s), i))
        .collect();
    if before.is_empty() {
        return;
    }
    for s in next.sockets.iter_mut() {
        if !s.owners.is_empty() || s.owners_status == OwnersStatus::NotRequested {
            continue;
        }
        let Some(&i) = before.get(&SocketKey::of(s)) else {
            continue;
        };
        let old = &prev.sockets[i];
        s.owners = old.owners.clone();
        s.owners_status = old.owners_status;
        for o in &old.owners {
            if let Some(p) = prev.processes.get(&o.pid) {
                next.processes.entry(o.pid).or_insert_with(|| p.clone());
                if let Some(uid) = p.uid {
                    if let Some(name) = prev.users.get(&uid) {
                        next.users.entry(uid).or_insert_with(|| name.clone());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::{Family, Owner, Process, RawString, SockType, State};
    use std::net::IpAddr;

    /// A TCP listener on 127.0.0.1:`port` with inode `id`.
    pub(crate) fn tcp(cookie: Option<u64>, port: u16, id: u64) -> Socket {
        Socket {
            id: Some(id),
            cookie,
            send_q: 128,
            uid: Some(0),
            ..Socket::new(
                Proto::Tcp,
                Family::Inet,
                SockType::Stream,
                State::Listen,
                Endpoint::Inet {
                    addr: "127.0.0.1".parse::<IpAddr>().unwrap(),
                    port,
                },
                None,
            )
        }
    }

    fn snap(sockets: Vec<Socket>) -> Snapshot {
        Snapshot {
            sockets,
            ..Snapshot::default()
        }
    }

    #[test]
    fn diff_by_cookie_ignores_everything_else() {
        let a = snap(vec![tcp(Some(1), 80, 10), tcp(Some(2), 81, 11)]);
        let mut moved = tcp(Some(2), 81, 11);
        moved.state = State::Established;
        moved.recv_q = 5;
        let b = snap(vec![moved, tcp(Some(3), 82, 12)]);
        assert_eq!(
            diff(&a, &b),
            Changes {
                opened: vec![1],
                closed: vec![0]
            }
        );
    }

    #[test]
    fn same_tuple_new_cookie_is_a_new_socket() {
        // A listener closed and reopened on the same port between refreshes.
        let a = snap(vec![tcp(Some(1), 80, 10)]);
        let b = snap(vec![tcp(Some(9), 80, 10)]);
        assert_eq!(
            diff(&a, &b),
            Changes {
                opened: vec![0],
                closed: vec![0]
            }
        );
    }

    #[test]
    fn without_cookies_the_tuple_and_inode_identify() {
        let a = snap(vec![tcp(None, 80, 10), tcp(None, 81, 11)]);
        let b = snap(vec![tcp(None, 80, 10), tcp(None, 81, 99)]);
        assert_eq!(
            diff(&a, &b),
            Changes {
                opened: vec![1],
                closed: vec![1]
            }
        );
        assert!(diff(&a, &a).is_empty());
        assert_eq!(diff(&Snapshot::default(), &a).opened, vec![0, 1]);
        assert_eq!(diff(&a, &Snapshot::default()).closed, vec![0, 1]);
    }

    #[test]
    fn a_socket_keeps_the_holders_it_had_while_its_process_exits() {
        let mut held = tcp(Some(1), 80, 10);
        held.owners = vec![Owner { pid: 7, fd: 3 }];
        held.owners_status = OwnersStatus::Known;
        let mut prev = snap(vec![held, tcp(Some(2), 81, 11)]);
        prev.processes.insert(
            7,
            Process {
                pid: 7,
                command: Some(RawString::new(b"web")),
                uid: Some(1000),
                args: None,
            },
        );
        prev.users.insert(1000, Some("www".into()));
        let mut orphan = tcp(Some(1), 80, 10);
        orphan.owners_status = OwnersStatus::Hidden;
        let mut next = snap(vec![orphan, tcp(Some(2), 81, 11), tcp(Some(3), 82, 12)]);
        carry_owners(&prev, &mut next);
        assert_eq!(next.sockets[0].owners, vec![Owner { pid: 7, fd: 3 }]);
        assert_eq!(next.sockets[0].owners_status, OwnersStatus::Known);
        assert!(next.process(7).is_some());
        assert_eq!(next.user_name(1000), Some("www"));
        assert!(next.sockets[1].owners.is_empty());
    }

    #[test]
    fn without_an_owner_scan_nothing_is_carried() {
        let mut held = tcp(Some(1), 80, 10);
        held.owners = vec![Owner { pid: 7, fd: 3 }];
        held.owners_status = OwnersStatus::Known;
        let prev = snap(vec![held]);
        let mut unscanned = tcp(Some(1), 80, 10);
        unscanned.owners_status = OwnersStatus::NotRequested;
        let mut next = snap(vec![unscanned]);
        carry_owners(&prev, &mut next);
        assert!(next.sockets[0].owners.is_empty());
    }
}
