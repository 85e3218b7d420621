//! The census: the tables a query does not read, read for their sockets' inodes alone, so that
//! a socket the owner scan meets in none of the tables read is known to be in no table
//! (`sys::unlisted`; doc/reference/linux.md, "Socket kinds").

use super::plan::{proc_only, targets, Ask, Target};
use super::procnet::from_proc_net;
use super::Gathered;
use crate::model::{Family, Proto, State};
use crate::query::{Query, Source};
use crate::sys::netlink::{self, Transport};
use sockstat_wire::inet_diag;
use sockstat_wire::{netlink_diag, packet_diag, unix_diag};
use std::path::Path;

/// The tables `q` does not read, read for their sockets' inodes alone when the caller asks for a
/// census ([`gather`]): with them a socket the owner scan meets that no table gave is known to
/// be in none (`sys::unlisted`) without asking the kernel about each held socket the query left
/// out (under `-P udp` at 60k TCP sockets, 60k questions).
pub(super) fn census_targets(q: &Query) -> Vec<Target> {
    let asked = targets(q);
    let mut all = Vec::new();
    for proto in Proto::ALL {
        match proto {
            Proto::Unix => all.push(Target::Unix),
            Proto::Packet => all.push(Target::Packet),
            Proto::Netlink => all.push(Target::Netlink),
            Proto::Other => {}
            p => {
                all.push(Target::Inet(p, Family::Inet));
                all.push(Target::Inet(p, Family::Inet6));
            }
        }
    }
    all.retain(|t| !asked.contains(t));
    all
}

/// The inodes of target `t`'s sockets in every state (TIME-WAIT and SYN-RECV entries have
/// none), nothing else asked of the kernel, appended to `out`: a census ([`census_targets`]).
/// From `/proc/net` where the kernel has no dump for it or the dump fails; a socket a failed
/// census misses is asked about through its fd instead, which costs more and is as right.
pub(super) fn census_target(
    q: &Query,
    t: Target,
    net_dir: &Path,
    transport: &mut dyn Transport,
    out: &mut Vec<u64>,
) {
    if q.gather.source != Source::Proc && !proc_only(t) {
        // Inodes alone: nothing but the header of each socket, every state that has one.
        let request = t.request(
            t.seq() + 100,
            &Ask {
                states: match t {
                    Target::Inet(..) | Target::TcpBothFamilies => !State::TimeWait.kernel_mask(),
                    _ => u32::MAX,
                },
                ext: 0,
                bytecode: None,
                unix_show: 0,
                packet_show: 0,
                netlink_show: 0,
            },
        );
        let start = out.len();
        let result = netlink::dump(transport, &t.key(), &request, |payload, _| {
            let inode = match t {
                Target::Inet(..) | Target::TcpBothFamilies => inet_diag::decode_msg(payload)?.inode,
                Target::Unix => unix_diag::decode_msg(payload)?.inode,
                Target::Packet => packet_diag::decode_msg(payload)?.inode,
                Target::Netlink => netlink_diag::decode_msg(payload)?.inode,
            };
            if inode != 0 {
                out.push(u64::from(inode));
            }
            Ok(())
        });
        if result.is_ok() {
            return;
        }
        out.truncate(start);
    }
    let mut g = Gathered::default();
    let mut every = Query::new();
    every.gather.proc_root = q.gather.proc_root.clone();
    every.select.protos = Some(Proto::ALL.to_vec());
    every.select.hide_time_wait = false;
    from_proc_net(&every, t, net_dir, &mut g);
    out.extend(g.sockets.iter().filter_map(|s| s.id));
}
