//! /proc/net text parsers on the captured files (fixtures/proc, Linux 6.18, see
//! fixtures/README.md) and on hand-written edge cases; fd links; counter files.

use std::net::SocketAddr;

use sockstat_wire::proc_net::{
    parse_inet_line, parse_inet_table, parse_packet_table, parse_unix_line, parse_unix_table,
    ProcInetEntry,
};
use sockstat_wire::{fd_link, snmp, DecodeError};

fn table(text: &str) -> Vec<ProcInetEntry> {
    parse_inet_table(text).collect::<Result<_, _>>().unwrap()
}

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[cfg(target_endian = "little")]
#[test]
fn tcp_and_tcp6_fixtures() {
    let v = table(include_str!("fixtures/proc/tcp"));
    assert_eq!(v.len(), 9);
    let lst = v.iter().find(|e| e.inode == 51489).unwrap();
    assert_eq!(lst.local, sa("127.0.0.1:40001"));
    assert_eq!(lst.remote, sa("0.0.0.0:0"));
    assert_eq!((lst.state, lst.rx_queue), (0x0a, 2));
    let s4 = v.iter().find(|e| e.inode == 51491).unwrap();
    assert_eq!((s4.state, s4.rx_queue), (1, 900));
    assert_eq!(s4.remote, sa("127.0.0.1:35862"));
    assert_eq!(v.iter().filter(|e| e.inode == 0).count(), 2);

    let v = table(include_str!("fixtures/proc/tcp6"));
    assert_eq!(v.len(), 5);
    let l6 = v.iter().find(|e| e.inode == 51494).unwrap();
    assert_eq!(l6.local, sa("[::1]:40002"));
    let sm = v.iter().find(|e| e.inode == 51499).unwrap();
    assert_eq!(sm.local, sa("[::ffff:127.0.0.1]:40003"));
    assert_eq!(sm.remote, sa("[::ffff:127.0.0.1]:50802"));
    let dual = v.iter().find(|e| e.inode == 51497).unwrap();
    assert_eq!(dual.local, sa("[::]:40003"));
}

#[cfg(target_endian = "little")]
#[test]
fn udp_fixtures_and_empty_tables() {
    let v = table(include_str!("fixtures/proc/udp"));
    assert_eq!(v.len(), 2);
    assert_eq!(
        (v[0].local, v[0].state, v[0].inode),
        (sa("127.0.0.1:40004"), 7, 51500)
    );
    assert!(v[0].rx_queue > 0);
    let v = table(include_str!("fixtures/proc/udp6"));
    assert_eq!((v[0].local, v[0].inode), (sa("[::1]:40006"), 51502));
    for empty in [
        include_str!("fixtures/proc/raw"),
        include_str!("fixtures/proc/raw6"),
        include_str!("fixtures/proc/udplite"),
    ] {
        assert_eq!(table(empty).len(), 0);
    }
}

#[test]
fn inet_hand_cases() {
    // tcp6 with the extra TCP columns, TIME-WAIT-style short line (fewer trailing columns).
    let l = "   3: 0000000000000000FFFF00000100007F:9C43 0000000000000000FFFF00000100007F:C672 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000";
    let e = parse_inet_line(l).unwrap();
    assert_eq!(
        (e.state, e.timer, e.expires_jiffies, e.inode),
        (6, 3, 0x1770, 0)
    );
    // Big inode and uid.
    let l = "   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000 4294967294        0 18446744073709551615 1";
    let e = parse_inet_line(l).unwrap();
    assert_eq!((e.uid, e.inode), (u32::MAX - 1, u64::MAX));
    // Errors name the line kind.
    let err = parse_inet_line("   0: 00000000:0016").unwrap_err();
    assert!(matches!(err, DecodeError::Truncated { .. }));
    assert!(err.to_string().contains("/proc/net inet line"));
    assert!(parse_inet_line("x 00000000:0016 00000000:0000 0A 0:0 0:0 0 0 0 1").is_err());
    assert!(parse_inet_line("0: 00000000:0016 00000000:0000 0A 0:0 0:0 0 -1 0 1").is_err());
    // Header lines and blank lines are skipped by the table parser.
    let t = "  sl  local_address rem_address   st\n\n   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 7 1\n";
    assert_eq!(table(t).len(), 1);
}

#[test]
fn v6_word_order() {
    // 2001:db8::1 is the words 20010db8 00000000 00000000 00000001 in network order; the
    // kernel loads each s6_addr32[i] as a host u32 and prints it with %08X, so on
    // little-endian it reads B80D0120 00000000 00000000 01000000.
    let words = [0x2001_0db8u32, 0, 0, 1];
    let hex: String = words
        .iter()
        .map(|w| format!("{:08X}", u32::from_ne_bytes(w.to_be_bytes())))
        .collect();
    if cfg!(target_endian = "little") {
        assert_eq!(hex, "B80D0120000000000000000001000000");
    }
    let l = format!(
        "   0: {hex}:01BB {hex}:D431 01 00000000:00000000 00:00000000 00000000     0        0 9 1"
    );
    let e = parse_inet_line(&l).unwrap();
    assert_eq!(e.local, sa("[2001:db8::1]:443"));
    assert_eq!(e.remote, sa("[2001:db8::1]:54321"));
}

#[test]
fn unix_fixture() {
    let text = include_bytes!("fixtures/proc/unix");
    let v: Vec<_> = parse_unix_table(text).collect::<Result<_, _>>().unwrap();
    assert_eq!(v.len(), 8);
    let l = v.iter().find(|e| e.inode == 51505).unwrap();
    assert!(l.listening());
    assert_eq!(l.path, Some(&b"/tmp/sockstat-fixture/listen sock"[..]));
    assert_eq!((l.refcount, l.sock_type, l.state), (2, 1, 1));
    let a = v.iter().find(|e| e.inode == 51509).unwrap();
    assert_eq!(a.path, Some(&b"@sockstat-abstract"[..]));
    assert_eq!(a.sock_type, 2);
    let pair = v.iter().find(|e| e.inode == 51510).unwrap();
    assert_eq!((pair.path, pair.state), (None, 3));
    // The embryo: inode 0 (printed "    0"), connecting, with the listener's path.
    let emb = v.iter().find(|e| e.inode == 0).unwrap();
    assert_eq!(emb.state, 2);
    assert_eq!(emb.path, Some(&b"/tmp/sockstat-fixture/listen sock"[..]));
}

#[test]
fn unix_hand_cases() {
    let e = parse_unix_line(
        b"ffff9a0e00000000: 0000000A 00000000 00010000 0005 01 123 /run/a b  c\r\n",
    )
    .unwrap();
    assert_eq!(e.refcount, 10);
    assert_eq!(e.sock_type, 5);
    assert_eq!(e.path, Some(&b"/run/a b  c"[..]));
    let e =
        parse_unix_line(b"0000000000000000: 0000001F 00000000 00000000 0002 01 99 @@x@").unwrap();
    assert_eq!((e.refcount, e.path), (31, Some(&b"@@x@"[..])));
    // Unbound: no path, and a trailing space is not a path.
    let e = parse_unix_line(b"0000000000000000: 00000002 00000000 00000000 0001 01 5").unwrap();
    assert_eq!(e.path, None);
    let e = parse_unix_line(b"0000000000000000: 00000002 00000000 00000000 0001 01 5 ").unwrap();
    assert_eq!(e.path, None);
    // Non-UTF-8 path bytes are kept as bytes.
    let e = parse_unix_line(b"0: 00000002 00000000 00000000 0001 01 5 /tmp/\xff\xfe").unwrap();
    assert_eq!(e.path, Some(&b"/tmp/\xff\xfe"[..]));
    assert!(parse_unix_line(b"0: 00000002 00000000 00000000 0001 01 x5").is_err());
    assert!(parse_unix_line(b"0: 00000002 00000000 00000000 10001 01 5").is_err());
    assert!(parse_unix_line(b"").is_err());
}

#[test]
fn packet_fixture() {
    let v: Vec<_> = parse_packet_table(include_str!("fixtures/proc/packet"))
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!(
        (v[0].sock_type, v[0].proto, v[0].ifindex, v[0].inode),
        (3, 3, 1, 51512)
    );
    assert!(v[0].running);
    assert_eq!((v[1].sock_type, v[1].proto, v[1].inode), (2, 0x0800, 51513));
}

#[test]
fn fd_links() {
    assert_eq!(fd_link::socket_inode(b"socket:[51489]"), Some(51489));
    assert_eq!(fd_link::socket_inode(b"socket:[00051489]"), Some(51489));
    assert_eq!(fd_link::socket_inode(b"socket:[0]"), Some(0));
    for bad in [
        &b"/home/u/socket:[123]"[..],
        b"socket:[]",
        b"socket:[12]x",
        b"anon_inode:[eventfd]",
        b"socket:[99999999999999999999]",
        b"socket:[12] ",
        b" socket:[12]",
        b"socket:[1\x002]",
        b"pipe:[123]",
    ] {
        assert_eq!(
            fd_link::socket_inode(bad),
            None,
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    assert_eq!(fd_link::netns_inode(b"net:[4026531840]"), Some(4026531840));
    assert_eq!(fd_link::netns_inode(b"net:[]"), None);
    assert_eq!(fd_link::netns_inode(b"mnt:[4026531840]"), None);
}

#[test]
fn snmp_fixtures() {
    let c = snmp::parse_paired(include_str!("fixtures/proc/snmp")).unwrap();
    let get = |g: &str, n: &str| {
        c.iter()
            .find(|c| c.group == g && c.name == n)
            .map(|c| c.value)
    };
    assert_eq!(get("Ip", "DefaultTTL"), Some(64));
    assert_eq!(get("Tcp", "MaxConn"), Some(-1));
    assert!(get("Tcp", "ActiveOpens").unwrap() >= 5);
    assert!(get("Udp", "InDatagrams").is_some());
    let c = snmp::parse_paired(include_str!("fixtures/proc/netstat")).unwrap();
    assert!(c
        .iter()
        .any(|c| c.group == "TcpExt" && c.name == "TCPTimeouts"));
    assert!(c.iter().any(|c| c.group == "IpExt" && c.name == "InOctets"));
    let c = snmp::parse_snmp6(include_str!("fixtures/proc/snmp6")).unwrap();
    assert!(c.len() > 50);
    for g in ["Ip6", "Icmp6", "Udp6", "UdpLite6"] {
        assert!(c.iter().any(|c| c.group == g), "{g}");
    }
    assert!(c.iter().all(|c| c.name.starts_with(c.group)));
}

#[test]
fn snmp_name_inserted_mid_line() {
    // The 6.3 change: Ip: gained OutTransmits; a future kernel may insert anywhere.
    let old = "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens\nTcp: 1 200 120000 -1 17\n";
    let new = "Tcp: RtoAlgorithm RtoMin Brand New RtoMax MaxConn ActiveOpens\nTcp: 1 200 8 9 120000 -1 17\n";
    for t in [old, new] {
        let c = snmp::parse_paired(t).unwrap();
        let get = |n: &str| c.iter().find(|c| c.name == n).unwrap().value;
        assert_eq!(
            (get("RtoMax"), get("MaxConn"), get("ActiveOpens")),
            (120000, -1, 17)
        );
    }
    let err = snmp::parse_paired("Tcp: A B C\nTcp: 1 2\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "counter group \"Tcp\": 3 names but 2 values"
    );
    // u64 counters above i64::MAX wrap rather than fail (they are deltas' inputs).
    let c = snmp::parse_paired("X: a\nX: 18446744073709551615\n").unwrap();
    assert_eq!(c[0].value, -1);
}

/// `/proc/net/netlink` copied right after the netlink_diag capture (capture_netlink.py): the same
/// twelve sockets, with their protocols, port ids and inodes.
#[test]
fn netlink_fixture() {
    let v: Vec<_> =
        sockstat_wire::proc_net::parse_netlink_table(include_str!("fixtures/proc/netlink"))
            .map(Result::unwrap)
            .collect();
    assert_eq!(v.len(), 12);
    let route = v.iter().find(|e| e.inode == 119302).unwrap();
    assert_eq!(
        (route.protocol, route.portid, route.groups),
        (0, 0x7001, 0x11)
    );
    let user = v.iter().find(|e| e.inode == 119304).unwrap();
    assert_eq!((user.protocol, user.portid), (2, 0x7003));
    assert_eq!(v.iter().filter(|e| e.portid == 0).count(), 8);
}
