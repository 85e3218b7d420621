//! `tcp_info` from every historical kernel size: exactly the fields that existed are `Some`.

use sockstat_wire::tcp_info::{TcpInfo, FIELDS, HISTORICAL_SIZES};

/// A 6.18 `tcp_info` captured on this machine (the `s4` socket of fixtures/netlink/tcp4.bin).
fn real_tcp_info() -> Vec<u8> {
    use sockstat_wire::netlink::{classify, messages, Control};
    let buf = include_bytes!("fixtures/netlink/tcp4.bin");
    for m in messages(buf) {
        if let Ok(Control::Data(p)) = classify(&m.unwrap()) {
            let d = sockstat_wire::inet_diag::decode_msg(p).unwrap();
            if d.inode == 51491 {
                return d.attrs.info.unwrap().to_vec();
            }
        }
    }
    panic!("s4 not in fixture");
}

#[test]
fn historical_sizes_table() {
    let sizes: Vec<usize> = HISTORICAL_SIZES.iter().map(|&(_, s)| s).collect();
    assert!(sizes.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(*sizes.last().unwrap(), TcpInfo::SIZE_6_18);
    // Every historical size ends on a field boundary.
    for &s in &sizes {
        assert!(
            s == TcpInfo::SIZE_6_18 || FIELDS.iter().any(|&(_, off, size)| off + size == s),
            "{s} is not a field end"
        );
    }
}

#[test]
fn each_historical_size_has_exactly_its_fields() {
    let full = real_tcp_info();
    assert_eq!(full.len(), 280);
    for &(version, size) in HISTORICAL_SIZES {
        let t = TcpInfo::from_bytes(&full[..size]);
        assert_eq!(t.len(), size);
        for ((name, v), &(_, off, fsize)) in t.fields().zip(FIELDS) {
            assert_eq!(v.is_some(), off + fsize <= size, "{version}: {name}");
        }
        // Values that exist are the real ones, not zero-fill artefacts.
        let whole = TcpInfo::from_bytes(&full);
        for ((n, a), (_, b)) in t.fields().zip(whole.fields()) {
            if a.is_some() {
                assert_eq!(a, b, "{version}: {n}");
            }
        }
        // Bitfields live in bytes 6-7, present on every kernel.
        assert!(t.snd_wscale().is_some() && t.delivery_rate_app_limited().is_some());
    }
}

#[test]
fn named_boundaries() {
    let full = real_tcp_info();
    let at = |n: usize| TcpInfo::from_bytes(&full[..n]);
    let t = at(104);
    assert!(t.total_retrans().is_some());
    assert!(t.pacing_rate().is_none());
    let t = at(120);
    assert!(t.max_pacing_rate().is_some() && t.bytes_acked().is_none());
    let t = at(136);
    assert!(t.bytes_received().is_some() && t.segs_out().is_none());
    let t = at(144);
    assert!(t.segs_in().is_some() && t.notsent_bytes().is_none());
    let t = at(160);
    assert!(t.data_segs_out().is_some() && t.delivery_rate().is_none());
    let t = at(168);
    assert!(t.delivery_rate().is_some() && t.busy_time_us().is_none());
    let t = at(192);
    assert!(t.sndbuf_limited_us().is_some() && t.delivered().is_none());
    let t = at(200);
    assert!(t.delivered_ce().is_some() && t.bytes_sent().is_none());
    let t = at(224);
    assert!(t.reord_seen().is_some() && t.rcv_ooopack().is_none());
    let t = at(232);
    assert!(t.snd_wnd().is_some() && t.rcv_wnd().is_none());
    let t = at(240);
    assert!(t.rehash().is_some() && t.total_rto().is_none());
    let t = at(248);
    assert!(t.total_rto_time_ms().is_some() && t.received_ce().is_none());
    let t = at(280);
    assert!(t.received_ce_bytes().is_some());
    // A u64 that is cut in half is absent, not half-read.
    let t = at(108);
    assert!(t.pacing_rate().is_none());
    assert_eq!(t.len(), 108);
}

#[test]
fn tiny_and_empty() {
    let t = TcpInfo::from_bytes(&[]);
    assert!(t.is_empty());
    assert!(t.fields().all(|(_, v)| v.is_none()));
    assert_eq!(t.snd_wscale(), None);
    let t = TcpInfo::from_bytes(&[1]);
    assert_eq!(t.state(), Some(1));
    assert_eq!(t.ca_state(), None);
}

#[test]
fn bytes_276_to_280_are_not_decoded() {
    // The 7.0 layout change (doc/reference/linux.md#kernel-versions): no accessor may read them.
    assert!(FIELDS.iter().all(|&(_, off, size)| off + size <= 276));
    let mut b = vec![0u8; 280];
    b[276..].copy_from_slice(&[0xff; 4]);
    let t = TcpInfo::from_bytes(&b);
    assert!(t.fields().all(|(_, v)| v == Some(0)));
    assert_eq!(&t.raw()[276..], &[0xff; 4]);
}
