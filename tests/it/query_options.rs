//! `Gathering::sorted` and `Gathering::unix_details` (what the exporter turns off), against real unix
//! sockets of this test process: with either off, the same sockets are listed in the same
//! states; without details a unix socket has no name and no peer, unless `connected_to` names a
//! unix listener, which needs them.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};

use sockstat::query::ConnectedTo;
use sockstat::{Endpoint, OwnerScan, Proto, Query, Socket, State};

/// The sockets of `q` whose inodes are in `ours`, by inode.
fn listed(q: &Query, ours: &[u64]) -> BTreeMap<u64, Socket> {
    sockstat::collect(q)
        .expect("listing unix sockets")
        .sockets
        .into_iter()
        .filter(|s| s.id.is_some_and(|i| ours.contains(&i)))
        .map(|s| (s.id.unwrap(), s))
        .collect()
}

fn unix_query() -> Query {
    let mut q = Query::new();
    q.select.protos = Some(vec![Proto::Unix]);
    q.gather.owner_scan = OwnerScan::Proc;
    q
}

#[test]
fn unsorted_and_detail_free_listings_keep_every_socket_and_state() {
    let dir = std::env::temp_dir().join(format!("sockstat-query-options-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("server.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let client = UnixStream::connect(&path).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    let inode = |fd: &dyn std::os::fd::AsRawFd| {
        std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .unwrap()
            .ino()
    };
    let ours = [inode(&listener), inode(&client), inode(&accepted)];

    let full = listed(&unix_query(), &ours);
    assert_eq!(full.len(), 3, "{full:?}");
    assert_eq!(full[&ours[0]].state, State::Listen);
    let named = |s: &Socket| matches!(&s.local, Endpoint::Unix(Some(_)));
    assert!(named(&full[&ours[0]]), "{:?}", full[&ours[0]]);
    // The client is named by its peer, the accepted end.
    assert!(
        matches!(&full[&ours[1]].remote, Some(Endpoint::UnixPeer { peer, name: Some(_) }) if *peer == ours[2]),
        "{:?}",
        full[&ours[1]]
    );

    let mut q = unix_query();
    q.gather.sorted = false;
    assert_eq!(listed(&q, &ours), full, "unsorted");

    let mut q = unix_query();
    q.gather.unix_details = false;
    let bare = listed(&q, &ours);
    assert_eq!(
        bare.iter().map(|(i, s)| (*i, s.state)).collect::<Vec<_>>(),
        full.iter().map(|(i, s)| (*i, s.state)).collect::<Vec<_>>()
    );
    assert!(
        bare.values().all(|s| !named(s) && s.remote.is_none()),
        "no names or peers without details: {bare:?}"
    );
    // Holders are still found.
    assert!(bare.values().all(|s| !s.owners.is_empty()), "{bare:?}");

    // A filter on the listener's name needs the names: they are read anyway.
    q.select.connected_to = Some(ConnectedTo::parse(path.to_str().unwrap()).unwrap());
    let to = listed(&q, &ours);
    assert!(
        to.contains_key(&ours[1]) && to.contains_key(&ours[2]),
        "{to:?}"
    );
    assert!(to.values().any(named), "{to:?}");

    drop((client, accepted, listener));
    let _ = std::fs::remove_dir_all(&dir);
}
