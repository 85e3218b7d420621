//! Sockets the owner scan saw that no table listed, and what the kernel says of a socket
//! through the fd a process holds.
//!
//! Some sockets are in no table sockstat reads: a ping socket never bound nor used (it enters
//! the kernel's hash when it is), a TCP or UDP socket never bound, a vsock, XDP or AF_ALG
//! socket. The owner scan still meets them, as `socket:[N]` in a process's fd table. Each such
//! inode becomes a row of kind [`Proto::Other`] with what the kernel tells about it read-only
//! through `/proc/PID/fd/N`: the name of its protocol (sockfs's `system.sockprotoname`
//! attribute, the `sk_prot_creator->name` lsof prints: `PINGv6`, `TCP`, `AF_VSOCK`) and its
//! owner uid (the socket inode's, which is the socket's uid). The holder's file is neither
//! duplicated nor used: the link is opened `O_PATH`, which gives a handle on the socket's inode
//! and nothing else (doc/reference/linux.md, "Socket kinds").

use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use crate::join::OwnerIndex;
use crate::model::{kernel_kind, Endpoint, KernelKind, Owner, Proto, RawString, Socket, State};
use crate::query::Query;

/// What the kernel says of a socket through a holder's fd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FdSocket {
    /// The socket inode's owner: the socket's uid (`sock_i_uid`).
    pub uid: u32,
    /// The kernel's name of its protocol, when asked for and it could be read.
    pub protocol: Option<RawString>,
}

/// Reads what the kernel says of socket `inode` through `owner`'s fd, read-only: `O_PATH` on
/// `/proc/PID/fd/N` (following the link to the socket itself), `fstat` (it must still be socket
/// `inode`: the fd may have been closed and reused, the pid reused, since the scan), and, with
/// `name`, the `system.sockprotoname` attribute through `/proc/self/fd/K` of that handle
/// (`fgetxattr` refuses an `O_PATH` descriptor). `Err(NOENT)` when it is gone or no longer
/// that socket.
pub(super) fn probe(
    proc_fd: &OwnedFd,
    owner: Owner,
    inode: u64,
    name: bool,
) -> Result<FdSocket, Errno> {
    let path = format!("{}/fd/{}", owner.pid, owner.fd);
    let handle = rustix::fs::openat(
        proc_fd,
        path.as_str(),
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&handle)?;
    let is_socket = rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Socket;
    if !is_socket || st.st_ino != inode {
        return Err(Errno::NOENT);
    }
    let protocol = if name {
        protocol_name(&handle).ok()
    } else {
        None
    };
    Ok(FdSocket {
        uid: st.st_uid,
        protocol,
    })
}

/// The `system.sockprotoname` attribute of the socket `handle` points at.
fn protocol_name(handle: &OwnedFd) -> Result<RawString, Errno> {
    let mut buf = [0u8; 64];
    let path = format!("/proc/self/fd/{}", handle.as_fd().as_raw_fd());
    let n = rustix::fs::getxattr(path.as_str(), "system.sockprotoname", &mut buf[..])?;
    let b = &buf[..n.min(buf.len())];
    let b = b.strip_suffix(b"\0").unwrap_or(b);
    Ok(RawString::new(b))
}

/// Whether an inode of this kind missing from the tables read can be a socket in none: not for
/// the kinds whose table lists every socket from its creation (unix, packet, raw: hashed when
/// made), where a miss is a socket made after its table was read. Ping, TCP, UDP, SCTP, MPTCP
/// and netlink sockets enter their tables only when bound (or connected, or used), and other
/// families have no table sockstat reads. Whether the query asks for it is the filters' say
/// ([`Query::matches_socket`], by the kind the kernel names).
fn may_be_unlisted(kind: &KernelKind) -> bool {
    !matches!(
        kind.listed_as,
        Some(Proto::Unix | Proto::Packet | Proto::Raw)
    )
}

/// The rows of kind other for the inodes `index` holds that no socket of `listed` has (nor
/// `left_out`, the inodes of sockets the tables gave that the filters left out), in the
/// namespaces the listing reads: a holder must run in one of them (its `ns/net`), which is the
/// namespace the row is put in. `zones` is the listing's (empty: the namespace sockstat runs
/// in). Sockets that are gone by the time they are asked about are left out.
pub(crate) fn sockets(
    q: &Query,
    index: &OwnerIndex,
    listed: &[Socket],
    left_out: &[u64],
    zones: &BTreeMap<u64, crate::zone::Zone>,
) -> Vec<Socket> {
    // The inodes held (sorted, from the index), each marked once a table is found to list it:
    // a pass over the sockets with a search in the held ones, which under `--pid` are few.
    let mut held: Vec<u64> = index.holders().iter().map(|h| h.inode).collect();
    held.dedup();
    let mut listed_too = vec![false; held.len()];
    for id in listed
        .iter()
        .filter_map(|s| s.id)
        .chain(left_out.iter().copied())
    {
        if let Ok(i) = held.binary_search(&id) {
            listed_too[i] = true;
        }
    }
    let missing: Vec<u64> = held
        .into_iter()
        .zip(listed_too)
        .filter_map(|(inode, listed)| (!listed).then_some(inode))
        .collect();
    if missing.is_empty() {
        return Vec::new();
    }
    let Ok(proc_fd) = rustix::fs::open(
        &q.gather.proc_root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return Vec::new();
    };
    // The listing's namespaces, by inode, with the zone key a row there gets.
    let namespaces: HashMap<u64, Option<u64>> = if zones.is_empty() {
        netns_of(&proc_fd, "self")
            .map(|n| (n, None))
            .into_iter()
            .collect()
    } else {
        zones
            .iter()
            .filter_map(|(key, z)| Some((z.netns_inode?, Some(*key))))
            .collect()
    };
    let mut netns_by_pid: HashMap<u32, Option<u64>> = HashMap::new();
    let mut out = Vec::new();
    for inode in missing {
        let held = index.holders_of(inode);
        let zone = held.iter().find_map(|h| {
            let ns = *netns_by_pid
                .entry(h.owner.pid)
                .or_insert_with(|| netns_of(&proc_fd, &h.owner.pid.to_string()));
            namespaces.get(&ns?).copied()
        });
        let Some(zone) = zone else { continue };
        // The first holder that still holds it tells; one that closed it meanwhile does not.
        let Some(fd) = held
            .iter()
            .find_map(|h| probe(&proc_fd, h.owner, inode, true).ok())
        else {
            continue;
        };
        let kind = match &fd.protocol {
            Some(n) => kernel_kind(n.as_bytes()),
            None => kernel_kind(b""),
        };
        if !may_be_unlisted(&kind) {
            continue;
        }
        let s = Socket {
            id: Some(inode),
            uid: Some(fd.uid),
            netns: zone,
            ..Socket::new(
                Proto::Other,
                kind.family,
                kind.sock_type,
                State::Untold,
                Endpoint::Unlisted(fd.protocol),
                None,
            )
        };
        if q.matches_socket(&s) {
            out.push(s);
        }
    }
    out
}

/// The network namespace inode of process `pid` (`self` for this one), from its `ns/net` link.
fn netns_of(proc_fd: &OwnedFd, pid: &str) -> Option<u64> {
    let mut buf = [0u8; 64];
    let n =
        rustix::fs::readlinkat_raw(proc_fd, format!("{pid}/ns/net").as_str(), &mut buf[..]).ok()?;
    sockstat_wire::fd_link::netns_inode(&buf[..n.min(buf.len())])
}

/// Gives netlink sockets the uid netlink_diag does not send, from a holder's fd ([`probe`]):
/// with it a socket whose creator holds it is `known` rather than `partial`
/// (`join::join`). Sockets no process the scan read holds keep none.
pub(crate) fn fill_uids(q: &Query, index: &OwnerIndex, sockets: &mut [Socket]) {
    if !sockets
        .iter()
        .any(|s| s.proto == Proto::Netlink && s.uid.is_none())
    {
        return;
    }
    let Ok(proc_fd) = rustix::fs::open(
        &q.gather.proc_root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    for s in sockets
        .iter_mut()
        .filter(|s| s.proto == Proto::Netlink && s.uid.is_none())
    {
        let Some(id) = s.id else { continue };
        s.uid = index
            .holders_of(id)
            .iter()
            .find_map(|h| probe(&proc_fd, h.owner, id, false).ok())
            .map(|f| f.uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::{Family, SockType};

    #[test]
    fn kernel_names_say_family_type_and_kind() {
        let k = kernel_kind(b"PINGv6");
        assert_eq!(
            (k.family, k.sock_type, k.listed_as),
            (Family::Inet6, SockType::Dgram, Some(Proto::Icmp))
        );
        let k = kernel_kind(b"AF_VSOCK");
        assert_eq!(
            (k.family, k.sock_type, k.listed_as),
            (Family::Other, SockType::Unknown, None)
        );
        assert_eq!(kernel_kind(b"UNIX-STREAM").sock_type, SockType::Unknown);
    }

    #[test]
    fn a_miss_in_a_table_that_lists_every_socket_is_not_an_unlisted_socket() {
        for (name, unlisted) in [
            (&b"PINGv6"[..], true),
            (b"TCP", true),
            (b"AF_VSOCK", true),
            (b"NETLINK", true),
            (b"UNIX", false),
            (b"RAWv6", false),
            (b"PACKET", false),
        ] {
            assert_eq!(
                may_be_unlisted(&kernel_kind(name)),
                unlisted,
                "{}",
                String::from_utf8_lossy(name)
            );
        }
    }

    /// The probe reads this process's own sockets as it reads another's: their protocol name
    /// and uid, and refuses an fd that is no longer the socket it was told about.
    #[test]
    fn the_kernel_names_a_socket_through_its_fd() {
        let me = std::process::id();
        let proc_fd = rustix::fs::open(
            "/proc",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let udp = std::net::UdpSocket::bind("[::1]:0").unwrap();
        for (sock, name) in [(tcp.as_fd(), "TCP"), (udp.as_fd(), "UDPv6")] {
            let st = rustix::fs::fstat(sock).unwrap();
            let owner = Owner {
                pid: me,
                fd: sock.as_raw_fd() as u32,
            };
            let got = probe(&proc_fd, owner, st.st_ino, true).unwrap();
            assert_eq!(got.uid, rustix::process::geteuid().as_raw());
            assert_eq!(got.protocol, Some(RawString::new(name.as_bytes())));
            assert_eq!(
                probe(&proc_fd, owner, st.st_ino + 1, true),
                Err(Errno::NOENT)
            );
        }
        let file = std::fs::File::open("/proc/self/stat").unwrap();
        let owner = Owner {
            pid: me,
            fd: file.as_raw_fd() as u32,
        };
        let st = rustix::fs::fstat(&file).unwrap();
        assert_eq!(
            probe(&proc_fd, owner, st.st_ino, true),
            Err(Errno::NOENT),
            "not a socket"
        );
    }
}
