//! Dump-loop control cases built by hand: DONE with an error, NLMSG_ERROR, DUMP_INTR, ACK,
//! OVERRUN, and malformed framing.

use sockstat_wire::netlink::{
    self, attrs, classify, encode_message, messages, Control, NLMSG_DONE, NLMSG_ERROR, NLMSG_NOOP,
    NLMSG_OVERRUN, NLM_F_DUMP_INTR, NLM_F_MULTI, SOCK_DIAG_BY_FAMILY,
};
use sockstat_wire::DecodeError;

const TCP4: &[u8] = include_bytes!("fixtures/netlink/tcp4.bin");

fn first_data_payload() -> Vec<u8> {
    for m in messages(TCP4) {
        if let Ok(Control::Data(p)) = classify(&m.unwrap()) {
            return p.to_vec();
        }
    }
    unreachable!()
}

fn collect(buf: &[u8]) -> Vec<Control<'_>> {
    messages(buf)
        .map(|m| classify(&m.unwrap()).unwrap())
        .collect()
}

#[test]
fn done_with_enoent_after_data() {
    let data = first_data_payload();
    let mut buf = encode_message(SOCK_DIAG_BY_FAMILY, NLM_F_MULTI, 1, &data);
    buf.extend(encode_message(
        NLMSG_DONE,
        NLM_F_MULTI,
        1,
        &(-2i32).to_ne_bytes(),
    ));
    let c = collect(&buf);
    assert!(matches!(c[0], Control::Data(_)));
    assert_eq!(c[1], Control::Done { errno: Some(2) });
}

#[test]
fn done_with_extack_tlvs_after_the_int() {
    // NLM_F_ACK_TLVS: the int is followed by attributes; only the int matters.
    let mut payload = (-95i32).to_ne_bytes().to_vec();
    netlink::push_attr(&mut payload, 1, b"Operation not supported\0");
    let buf = encode_message(NLMSG_DONE, NLM_F_MULTI | 0x200, 1, &payload);
    assert_eq!(collect(&buf), vec![Control::Done { errno: Some(95) }]);
    let buf = encode_message(NLMSG_DONE, NLM_F_MULTI, 1, &0i32.to_ne_bytes());
    assert_eq!(collect(&buf), vec![Control::Done { errno: None }]);
}

#[test]
fn nlmsg_error_carries_positive_errno() {
    // struct nlmsgerr: int error; struct nlmsghdr msg (the request header).
    let mut payload = (-22i32).to_ne_bytes().to_vec();
    payload.extend_from_slice(&[0u8; 16]);
    let buf = encode_message(NLMSG_ERROR, 0, 9, &payload);
    assert_eq!(collect(&buf), vec![Control::Error { errno: 22 }]);
    // error 0 is an ACK.
    let buf = encode_message(NLMSG_ERROR, 0, 9, &[0u8; 20]);
    assert_eq!(collect(&buf), vec![Control::Error { errno: 0 }]);
    // A NLMSG_ERROR too short for its int is a decode error, not a panic.
    let buf = encode_message(NLMSG_ERROR, 0, 9, &[1, 2]);
    let m = messages(&buf).next().unwrap().unwrap();
    assert!(matches!(classify(&m), Err(DecodeError::Truncated { .. })));
}

#[test]
fn dump_intr_is_reported_on_any_message() {
    let data = first_data_payload();
    let mut buf = encode_message(SOCK_DIAG_BY_FAMILY, NLM_F_MULTI, 1, &data);
    buf.extend(encode_message(
        SOCK_DIAG_BY_FAMILY,
        NLM_F_MULTI | NLM_F_DUMP_INTR,
        1,
        &data,
    ));
    buf.extend(encode_message(
        NLMSG_DONE,
        NLM_F_MULTI | NLM_F_DUMP_INTR,
        1,
        &0i32.to_ne_bytes(),
    ));
    let flags: Vec<bool> = messages(&buf)
        .map(|m| m.unwrap().dump_interrupted())
        .collect();
    assert_eq!(flags, vec![false, true, true]);
}

#[test]
fn overrun_noop_and_reserved_types() {
    let mut buf = encode_message(NLMSG_OVERRUN, 0, 1, &[]);
    buf.extend(encode_message(NLMSG_NOOP, 0, 1, &[]));
    buf.extend(encode_message(7, 0, 1, &[]));
    buf.extend(encode_message(0x10, 0, 1, &[5]));
    assert_eq!(
        collect(&buf),
        vec![
            Control::Overrun,
            Control::Other(NLMSG_NOOP),
            Control::Other(7),
            Control::Data(&[5])
        ]
    );
}

#[test]
fn header_fields_and_padding() {
    let buf = encode_message(SOCK_DIAG_BY_FAMILY, NLM_F_MULTI, 0xdead_beef, &[1, 2, 3]);
    assert_eq!(buf.len(), 20);
    let m = messages(&buf).next().unwrap().unwrap();
    assert_eq!((m.ty, m.flags, m.seq, m.pid), (20, 2, 0xdead_beef, 0));
    assert_eq!(m.payload, &[1, 2, 3]);
    // A final message that is not padded to 4 bytes in the buffer still walks.
    let unpadded = &buf[..19];
    let mut h = unpadded.to_vec();
    h[0..4].copy_from_slice(&19u32.to_ne_bytes());
    let v: Vec<_> = messages(&h).collect();
    assert_eq!(v.len(), 1);
    assert!(v[0].is_ok());
}

#[test]
fn malformed_framing_yields_one_error_then_stops() {
    let good = encode_message(NLMSG_DONE, 0, 1, &0i32.to_ne_bytes());
    // nlmsg_len beyond the buffer.
    let mut bad = good.clone();
    bad[0..4].copy_from_slice(&1000u32.to_ne_bytes());
    let mut buf = good.clone();
    buf.extend_from_slice(&bad);
    let v: Vec<_> = messages(&buf).collect();
    assert_eq!(v.len(), 2);
    assert!(v[0].is_ok());
    assert!(matches!(
        v[1],
        Err(DecodeError::Truncated { need: 1000, .. })
    ));
    // nlmsg_len 0 would loop forever in a naive walker.
    let mut zero = good.clone();
    zero[0..4].copy_from_slice(&0u32.to_ne_bytes());
    let v: Vec<_> = messages(&zero).collect();
    assert_eq!(v.len(), 1);
    assert!(matches!(v[0], Err(DecodeError::Malformed { .. })));
    // A tail shorter than a header.
    let mut buf = good.clone();
    buf.extend_from_slice(&[0; 7]);
    let v: Vec<_> = messages(&buf).collect();
    assert_eq!(v.len(), 2);
    assert!(v[1].is_err());
    assert_eq!(messages(&[]).count(), 0);
}

#[test]
fn attrs_walker_edge_cases() {
    // nla_len 0 would loop forever in a naive walker.
    let v: Vec<_> = attrs(&[0, 0, 1, 0, 9, 9, 9, 9]).collect();
    assert_eq!(v.len(), 1);
    assert!(v[0].is_err());
    // Exactly-4 attribute (empty payload) of type 0.
    let mut b = Vec::new();
    netlink::push_attr(&mut b, 0, &[]);
    assert_eq!(attrs(&b).collect::<Vec<_>>(), vec![Ok((0u16, &[][..]))]);
    // Payload too long for nla_len is refused, nothing appended.
    let mut b = Vec::new();
    assert!(!netlink::push_attr(&mut b, 1, &vec![0u8; 70000]));
    assert!(b.is_empty());
    // Last attribute unpadded at the end of the buffer.
    let b = [5u8, 0, 4, 0, 42];
    assert_eq!(attrs(&b).collect::<Vec<_>>(), vec![Ok((4u16, &[42u8][..]))]);
}

#[test]
fn error_messages_say_what_and_where() {
    let e = DecodeError::Truncated {
        what: "inet_diag_msg",
        need: 72,
        have: 10,
    };
    assert_eq!(e.to_string(), "truncated inet_diag_msg: need 72, have 10");
    let m = messages(&[0u8; 16]).next().unwrap().unwrap_err();
    assert_eq!(
        m.to_string(),
        "malformed nlmsghdr at offset 0: nlmsg_len shorter than the header"
    );
    let _: &dyn std::error::Error = &m;
}
