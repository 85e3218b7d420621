//! Decoders against real sock_diag replies captured on Linux 6.18 (see fixtures/README.md for
//! the sockets and requests; inode numbers come from fixtures/capture-info.json).

use std::net::IpAddr;

use sockstat_wire::inet_diag::{self, InetDiagMsg, InetDiagReq, AF_INET, AF_INET6};
use sockstat_wire::netlink::{self, classify, messages, Control};
use sockstat_wire::netlink_diag::{self, NetlinkDiagReq};
use sockstat_wire::packet_diag::{self, PacketDiagReq};
use sockstat_wire::tcp_info::{opt, TcpInfo};
use sockstat_wire::unix_diag::{self, UnixDiagReq, UnixName};

const TCP4: &[u8] = include_bytes!("fixtures/netlink/tcp4.bin");
const TCP6: &[u8] = include_bytes!("fixtures/netlink/tcp6.bin");
const UDP4: &[u8] = include_bytes!("fixtures/netlink/udp4.bin");
const UDP6: &[u8] = include_bytes!("fixtures/netlink/udp6.bin");
const MPTCP4: &[u8] = include_bytes!("fixtures/netlink/mptcp4.bin");
const RAW4: &[u8] = include_bytes!("fixtures/netlink/raw4_enoent.bin");
const BAD_BC: &[u8] = include_bytes!("fixtures/netlink/tcp4_bad_bytecode.bin");
const UNIX: &[u8] = include_bytes!("fixtures/netlink/unix.bin");
const TIMEWAIT: &[u8] = include_bytes!("fixtures/netlink/tcp4_timewait.bin");
const PACKET: &[u8] = include_bytes!("fixtures/netlink/packet.bin");
/// `capture_netlink.py`, its own namespace (inodes in capture-netlink-info.json).
const NETLINK: &[u8] = include_bytes!("fixtures/netlink/netlink.bin");

/// Data payloads of a dump, asserting it ends with a clean NLMSG_DONE.
fn payloads(buf: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut done = false;
    for m in messages(buf) {
        let m = m.expect("well-formed capture");
        assert!(!done, "message after NLMSG_DONE");
        assert!(!m.dump_interrupted());
        match classify(&m).unwrap() {
            Control::Data(p) => {
                assert_eq!(m.ty, netlink::SOCK_DIAG_BY_FAMILY);
                assert_ne!(m.flags & netlink::NLM_F_MULTI, 0);
                out.push(p)
            }
            Control::Done { errno: None } => done = true,
            c => panic!("unexpected {c:?}"),
        }
    }
    assert!(done, "dump did not end with NLMSG_DONE");
    out
}

fn inet(buf: &[u8]) -> Vec<InetDiagMsg<'_>> {
    payloads(buf)
        .into_iter()
        .map(|p| inet_diag::decode_msg(p).unwrap())
        .collect()
}

fn find<'a, 'b>(v: &'b [InetDiagMsg<'a>], sport: u16, dport: u16) -> &'b InetDiagMsg<'a> {
    v.iter()
        .find(|m| m.sport == sport && m.dport == dport)
        .unwrap_or_else(|| panic!("no socket {sport} -> {dport}"))
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn requests_match_what_was_sent() {
    let tcp = InetDiagReq {
        family: AF_INET,
        protocol: inet_diag::IPPROTO_TCP,
        ext: inet_diag::ext::INFO
            | inet_diag::ext::SKMEMINFO
            | inet_diag::ext::CONG
            | inet_diag::ext::TOS
            | inet_diag::ext::VEGASINFO,
        raw_protocol: 0,
        states: u32::MAX,
        sport: 0,
        dport: 0,
        bytecode: None,
    };
    assert_eq!(
        tcp.encode(101),
        include_bytes!("fixtures/netlink/tcp4.req.bin")
    );
    let tcp6 = InetDiagReq {
        family: AF_INET6,
        ext: tcp.ext | inet_diag::ext::TCLASS,
        ..tcp.clone()
    };
    assert_eq!(
        tcp6.encode(102),
        include_bytes!("fixtures/netlink/tcp6.req.bin")
    );
    let mptcp = InetDiagReq {
        protocol: inet_diag::IPPROTO_MPTCP,
        ext: inet_diag::ext::INFO,
        ..tcp.clone()
    };
    assert_eq!(
        mptcp.encode(106),
        include_bytes!("fixtures/netlink/mptcp4.req.bin")
    );
    let raw = InetDiagReq {
        protocol: inet_diag::IPPROTO_RAW,
        raw_protocol: 255,
        ext: 0,
        ..tcp.clone()
    };
    assert_eq!(
        raw.encode(105),
        include_bytes!("fixtures/netlink/raw4_enoent.req.bin")
    );
    let bad = InetDiagReq {
        ext: 0,
        bytecode: Some(vec![0, 0, 0, 0]),
        ..tcp
    };
    assert_eq!(
        bad.encode(107),
        include_bytes!("fixtures/netlink/tcp4_bad_bytecode.req.bin")
    );
    let unix = UnixDiagReq {
        states: u32::MAX,
        show: 0x7f,
    };
    assert_eq!(
        unix.encode(108),
        include_bytes!("fixtures/netlink/unix.req.bin")
    );
    assert_eq!(
        PacketDiagReq { show: 0x3f }.encode(109),
        include_bytes!("fixtures/netlink/packet.req.bin")
    );
}

#[test]
fn tcp4_dump() {
    let v = inet(TCP4);
    assert!(v.iter().all(|m| m.family == AF_INET && m.cookie != 0));
    // Cookies are unique identities.
    let mut cookies: Vec<u64> = v.iter().map(|m| m.cookie).collect();
    cookies.sort_unstable();
    cookies.dedup();
    assert_eq!(cookies.len(), v.len());

    let lst = find(&v, 40001, 0);
    assert_eq!((lst.state, lst.inode), (10, 51489));
    assert_eq!(lst.src, ip("127.0.0.1"));
    assert_eq!(lst.dst, ip("0.0.0.0"));
    // LISTEN: rqueue = accept queue (2 pending), wqueue = backlog (8).
    assert_eq!((lst.rqueue, lst.wqueue), (2, 8));
    let li = TcpInfo::from_bytes(lst.attrs.info.unwrap());
    assert_eq!((li.unacked(), li.sacked()), (Some(2), Some(8)));

    // s4: the accepted server end holds 900 unread bytes.
    let s4 = find(&v, 40001, 35862);
    assert_eq!((s4.state, s4.inode, s4.rqueue), (1, 51491, 900));
    assert_eq!(s4.attrs.cong, Some("bbr"));
    assert_eq!(s4.attrs.tos, Some(0));
    assert_eq!(s4.attrs.shutdown, Some(0));
    assert_eq!(s4.attrs.cgroup_id, Some(1));
    assert_eq!(s4.attrs.mark, Some(0)); // root: CAP_NET_ADMIN
    assert_eq!(s4.attrs.tclass, None); // AF_INET
    let sk = s4.attrs.skmeminfo.unwrap();
    assert_eq!(
        (sk.rcvbuf, sk.backlog, sk.drops),
        (131072, Some(0), Some(0))
    );
    assert!(sk.rmem_alloc > 0);
    let bbr = s4.attrs.bbr.unwrap();
    assert!(bbr.min_rtt_us > 0);
    let t = TcpInfo::from_bytes(s4.attrs.info.unwrap());
    assert_eq!(t.len(), TcpInfo::SIZE_6_18);
    assert_eq!(t.state(), Some(1));
    assert_eq!(t.bytes_received(), Some(1000));
    assert_eq!(t.rcv_mss(), Some(1000));
    assert_eq!(
        t.options().unwrap() & (opt::TIMESTAMPS | opt::SACK | opt::WSCALE),
        7
    );
    // wscale byte 0xaa: both shifts 10 (tcp_rmem max 32 MiB on this machine).
    assert_eq!((t.snd_wscale(), t.rcv_wscale()), (Some(10), Some(10)));
    assert_eq!(t.rto_us(), Some(204_000));
    assert!(t.rtt_us().unwrap() > 0 && t.min_rtt_us().unwrap() > 0);
    assert!(t.snd_wnd().is_some() && t.received_ce_bytes().is_some());

    // c4: the client that sent 1000 bytes.
    let c4 = find(&v, 35862, 40001);
    assert_eq!(c4.inode, 51490);
    let t = TcpInfo::from_bytes(c4.attrs.info.unwrap());
    assert_eq!((t.bytes_acked(), t.bytes_sent()), (Some(1001), Some(1000)));
    assert!(t.delivery_rate().unwrap() > 0);

    // Server ends still in the accept queue have no inode.
    assert_eq!(find(&v, 40001, 35864).inode, 0);
    assert_eq!(find(&v, 40001, 35866).inode, 0);
    // The cubic client.
    let cub = find(&v, 35866, 40001);
    assert_eq!((cub.inode, cub.attrs.cong), (51493, Some("cubic")));
    assert!(cub.attrs.bbr.is_none());
    // The MPTCP listener's TCP subflow listener.
    let sub = find(&v, 40007, 0);
    assert_eq!(sub.attrs.ulp_name, Some("mptcp"));
    assert_eq!(sub.inode, 51503);
}

#[test]
fn time_wait_minisocket_has_no_owner_and_no_attrs() {
    let v = inet(TIMEWAIT);
    assert_eq!(v.len(), 2);
    let lst = find(&v, 40010, 0);
    assert_eq!((lst.state, lst.inode), (10, 10593263));
    let tw = v.iter().find(|m| m.state == 6).unwrap();
    assert_eq!(tw.dport, 40010);
    // inet_twsk_diag_fill: timer 3, expires within TCP_TIMEWAIT_LEN, uid and inode 0.
    assert_eq!(
        (tw.timer, tw.uid, tw.inode, tw.rqueue, tw.wqueue),
        (3, 0, 0, 0, 0)
    );
    assert!(tw.expires_ms > 0 && tw.expires_ms <= 60_000);
    // Only MARK (root) is sent for TIME-WAIT: no INFO, SHUTDOWN, CGROUP_ID ...
    assert_eq!(tw.attrs.mark, Some(0));
    assert!(tw.attrs.info.is_none() && tw.attrs.shutdown.is_none());
    assert!(tw.attrs.cgroup_id.is_none() && tw.attrs.skmeminfo.is_none());
    let req = InetDiagReq {
        family: AF_INET,
        protocol: inet_diag::IPPROTO_TCP,
        ext: 0x5e,
        raw_protocol: 0,
        states: u32::MAX,
        sport: 0,
        dport: 0,
        bytecode: None,
    };
    assert_eq!(
        req.encode(110),
        include_bytes!("fixtures/netlink/tcp4_timewait.req.bin")
    );
}

#[test]
fn tcp6_dump_keeps_v4_mapped() {
    let v = inet(TCP6);
    assert!(v.iter().all(|m| m.family == AF_INET6));
    let lst = find(&v, 40002, 0);
    assert_eq!((lst.src, lst.attrs.v6only), (ip("::1"), Some(true)));
    let dual = find(&v, 40003, 0);
    assert_eq!((dual.src, dual.attrs.v6only), (ip("::"), Some(false)));
    let sm = find(&v, 40003, 50802);
    assert_eq!(sm.inode, 51499);
    assert_eq!(sm.src, ip("::ffff:127.0.0.1"));
    assert_eq!(sm.dst, ip("::ffff:127.0.0.1"));
    assert!(matches!(sm.src, IpAddr::V6(_)));
    assert_eq!(sm.attrs.v6only, None); // only sent in LISTEN/CLOSE
    let c6 = find(&v, 36978, 40002);
    assert_eq!(
        (c6.inode, c6.attrs.tclass, c6.attrs.class_id),
        (51495, Some(0), Some(0))
    );
    let s6 = find(&v, 40002, 36978);
    assert_eq!(s6.inode, 51496);
}

#[test]
fn udp_dumps() {
    let v = inet(UDP4);
    let u = find(&v, 40004, 0);
    assert_eq!((u.state, u.inode), (7, 51500));
    assert!(u.rqueue > 0, "one unread datagram");
    assert!(u.attrs.info.is_none() && u.attrs.cong.is_none());
    assert_eq!(u.attrs.skmeminfo.unwrap().rmem_alloc, u.rqueue);
    let c = find(&v, 40005, 40004);
    assert_eq!((c.state, c.inode, c.dst), (1, 51501, ip("127.0.0.1")));
    let v = inet(UDP6);
    let u = find(&v, 40006, 0);
    assert_eq!((u.src, u.inode), (ip("::1"), 51502));
}

#[test]
fn mptcp_info_is_not_tcp_info() {
    let v = inet(MPTCP4);
    assert_eq!(v.len(), 1);
    assert_eq!((v[0].sport, v[0].inode), (40007, 51503));
    // struct mptcp_info is 96 bytes on 6.18: decode by protocol, not as tcp_info.
    assert_eq!(v[0].attrs.info.map(<[u8]>::len), Some(96));
}

#[test]
fn raw_without_handler_is_done_enoent() {
    let msgs: Vec<_> = messages(RAW4).collect::<Result<_, _>>().unwrap();
    assert_eq!(msgs.len(), 1);
    assert_eq!(
        classify(&msgs[0]).unwrap(),
        Control::Done { errno: Some(2) }
    );
}

#[test]
fn bad_bytecode_is_nlmsg_error_einval() {
    let msgs: Vec<_> = messages(BAD_BC).collect::<Result<_, _>>().unwrap();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].ty, netlink::NLMSG_ERROR);
    assert_eq!(classify(&msgs[0]).unwrap(), Control::Error { errno: 22 });
    assert!(!sockstat_wire::bytecode::audit(&[0, 0, 0, 0]));
}

#[test]
fn unix_dump() {
    let v: Vec<_> = payloads(UNIX)
        .into_iter()
        .map(|p| unix_diag::decode_msg(p).unwrap())
        .collect();
    let by_ino = |i: u32| v.iter().find(|m| m.inode == i).unwrap();

    let l = by_ino(51505);
    assert_eq!((l.sock_type, l.state), (1, 10));
    // The kernel sends the path with its terminating NUL; name keeps it raw.
    assert_eq!(l.name, Some(&b"/tmp/sockstat-fixture/listen sock\0"[..]));
    assert_eq!(
        l.name_kind(),
        UnixName::Path(b"/tmp/sockstat-fixture/listen sock")
    );
    assert!(l.vfs.is_some());
    assert_eq!(l.icons_iter().collect::<Vec<_>>(), vec![51507]);
    assert_eq!(l.rqlen, Some((1, 4))); // accept queue 1, backlog 4
    assert_eq!(l.uid, Some(0));

    let a = by_ino(51509);
    assert_eq!((a.sock_type, a.state), (2, 7));
    assert_eq!(a.name, Some(&b"\0sockstat-abstract"[..]));
    assert_eq!(a.name_kind(), UnixName::Abstract(b"sockstat-abstract"));

    // Peers pair up: socketpair, and the accepted connection.
    assert_eq!(by_ino(51510).peer, Some(51511));
    assert_eq!(by_ino(51511).peer, Some(51510));
    assert_eq!(by_ino(51506).peer, Some(51508));
    assert_eq!(by_ino(51508).peer, Some(51506));
    assert_eq!(
        by_ino(51511).rqlen,
        Some((4, 0)),
        "pair2 has 4 unread bytes"
    );
    // The pending client's peer is the embryo, which has no inode yet.
    assert_eq!(by_ino(51507).peer, Some(0));
    assert!(v
        .iter()
        .all(|m| m.shutdown == Some(0) && m.meminfo.is_some()));
    assert!(v.iter().all(|m| m.cookie != 0));
}

#[test]
fn packet_dump() {
    let v: Vec<_> = payloads(PACKET)
        .into_iter()
        .map(|p| packet_diag::decode_msg(p).unwrap())
        .collect();
    assert_eq!(v.len(), 2);
    let raw = v.iter().find(|m| m.inode == 51512).unwrap();
    assert_eq!((raw.sock_type, raw.num), (3, 0x0003)); // ETH_P_ALL, host order
    let info = raw.info.unwrap();
    assert_eq!(info.ifindex, 1);
    assert!(info.running());
    assert_eq!(raw.uid, Some(0));
    assert!(raw.meminfo.is_some());
    let dg = v.iter().find(|m| m.inode == 51513).unwrap();
    assert_eq!((dg.sock_type, dg.num), (2, 0x0800)); // ETH_P_IP
    assert_eq!(dg.info.unwrap().ifindex, 0);
}

#[test]
fn every_prefix_of_every_capture_is_ok_or_err() {
    for buf in [
        TCP4, TCP6, UDP4, UDP6, MPTCP4, RAW4, BAD_BC, UNIX, PACKET, TIMEWAIT, NETLINK,
    ] {
        for n in 0..=buf.len() {
            let b = &buf[..n];
            let mut errs = 0;
            for m in messages(b) {
                match m {
                    Ok(m) => {
                        if let Ok(Control::Data(p)) = classify(&m) {
                            let _ = inet_diag::decode_msg(p);
                            let _ = unix_diag::decode_msg(p);
                            let _ = packet_diag::decode_msg(p);
                            let _ = netlink_diag::decode_msg(p);
                        }
                    }
                    Err(_) => errs += 1,
                }
            }
            assert!(errs <= 1, "messages() yields at most one error");
        }
        // Every truncation of every message payload decodes to Ok or Err, never panics.
        for m in messages(buf).map_while(Result::ok) {
            for n in 0..=m.payload.len() {
                let p = &m.payload[..n];
                let _ = classify(&netlink::NlMsg { payload: p, ..m });
                let _ = inet_diag::decode_msg(p);
                let _ = unix_diag::decode_msg(p);
                let _ = packet_diag::decode_msg(p);
                let _ = netlink_diag::decode_msg(p);
            }
        }
    }
}

/// The netlink_diag capture (Linux 6.18): the three user sockets `capture_netlink.py` made, the
/// diag socket that asked, and the kernel's own sockets (port id 0, one per protocol the
/// namespace has).
#[test]
fn netlink_sockets() {
    assert_eq!(
        NetlinkDiagReq {
            protocol: netlink_diag::NDIAG_PROTO_ALL,
            show: netlink_diag::show::MEMINFO
                | netlink_diag::show::GROUPS
                | netlink_diag::show::FLAGS,
        }
        .encode(120),
        include_bytes!("fixtures/netlink/netlink.req.bin")
    );
    let v: Vec<_> = payloads(NETLINK)
        .into_iter()
        .map(|p| netlink_diag::decode_msg(p).unwrap())
        .collect();
    let by_inode = |i: u32| v.iter().find(|m| m.inode == i).unwrap();
    // route: NETLINK_ROUTE, SOCK_RAW, bound to 0x7001 in groups 1 and 5, not connected.
    let route = by_inode(119302);
    assert_eq!(
        (route.protocol, route.sock_type, route.portid),
        (0, 3, 0x7001)
    );
    assert_eq!(
        netlink_diag::protocol_name(route.protocol),
        Some("NETLINK_ROUTE")
    );
    assert!(!route.connected());
    assert_eq!(route.groups.as_deref(), Some(&[1, 5][..]));
    assert!(route.meminfo.is_some());
    assert_eq!(route.flags, Some(0));
    // generic: NETLINK_GENERIC, SOCK_DGRAM, connected to the kernel.
    let generic = by_inode(119303);
    assert_eq!(
        (generic.protocol, generic.sock_type, generic.portid),
        (16, 2, 0x7002)
    );
    assert!(generic.connected());
    assert_eq!((generic.dst_portid, generic.dst_group), (0, 0));
    // user: NETLINK_USERSOCK connected to route's port id.
    let user = by_inode(119304);
    assert_eq!((user.protocol, user.portid), (2, 0x7003));
    assert!(user.connected());
    assert_eq!(user.dst_portid, 0x7001);
    // The socket that asked for the dump is in it (sock_diag, its autobound port id).
    let diag = by_inode(119305);
    assert_eq!((diag.protocol, diag.portid), (4, 31584));
    // The kernel's own sockets have port id 0; this namespace has one per protocol it runs.
    let kernel: Vec<u8> = v
        .iter()
        .filter(|m| m.portid == 0)
        .map(|m| m.protocol)
        .collect();
    assert!(
        kernel.contains(&0) && kernel.contains(&4) && kernel.contains(&16),
        "{kernel:?}"
    );
    // A socket in multicast groups is sent twice, from the bound table and from the group
    // listeners' list (`__netlink_diag_dump`): the same cookie, which is what a reader
    // deduplicates on. Twelve sockets, as /proc/net/netlink lists them.
    assert_eq!(v.len(), 13);
    let mut cookies: Vec<u64> = v.iter().map(|m| m.cookie).collect();
    cookies.sort_unstable();
    cookies.dedup();
    assert_eq!(cookies.len(), 12);
    assert_eq!(v.iter().filter(|m| m.inode == 119302).count(), 2);
    // Unconnected is sock_init_data's TCP_CLOSE (7), not 0.
    assert_eq!(route.state, 7);
}
