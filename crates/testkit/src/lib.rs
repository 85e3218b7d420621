//! Test support for sockstat's integration tests.
//!
//! The main piece is **sockholder** ([`holder`]): a process that opens the sockets described on
//! its command line, prints one JSON line describing them (a [`Report`]), then holds everything
//! open until its standard input is closed. It asks for `SIGKILL` when its parent dies
//! (`PR_SET_PDEATHSIG`), and so does a child it forks, so a test that dies never leaks holders.
//!
//! It runs two ways, with the same code:
//! - as the `sockholder` binary of this package (for trying things by hand);
//! - inside any test binary that links this crate and calls [`holder::run_if_requested`] from an
//!   ELF constructor: the test binary re-executes itself with [`HOLDER_ENV`] set, and the
//!   constructor turns the process into a holder before the test harness starts. This is how the
//!   root package's integration tests use it: no nested `cargo build`, no guessing of
//!   `target/<profile>/` paths, works with a plain `cargo test` on a clean checkout.
//!
//! # Specs
//!
//! | spec | what is opened (roles in the report) |
//! |---|---|
//! | `tcp4-listen:127.0.0.1:0`, `tcp6-listen:[::1]:0` | a TCP listener (`listener`) |
//! | `tcp4-pair[:ADDR]`, `tcp6-pair[:ADDR]` | listener, connected client, accepted server, all held (`listener`, `client`, `server`) |
//! | `tcp4-pending[:ADDR]`, `tcp6-pending[:ADDR]` | listener and client; the server end stays in the accept queue (`listener`, `client`, `pending` without fd or inode) |
//! | `udp4:127.0.0.1:0`, `udp6:[::1]:0` | an unconnected, bound UDP socket (`socket`) |
//! | `udp4-connected:LOCAL->REMOTE`, `udp6-connected:...` | a UDP socket bound to LOCAL and connected to REMOTE (`socket`); REMOTE's port may be `#N`: the port of item N's first socket |
//! | `packet:PROTO:IFNAME` | an AF_PACKET raw socket for ETH_P_PROTO (hex: `0003`) bound to IFNAME, or `*` for every interface (`socket`, no address) |
//! | `udp4-bound-dev:127.0.0.1:0%lo`, `udp6-bound-dev:[::1]:0%lo` | a UDP socket bound to the address on that device (`SO_BINDTODEVICE`) (`socket`) |
//! | `icmp4:127.0.0.1:0`, `icmp6:[::1]:0` | a bound ICMP ping socket (`socket`); the group must be in `net.ipv4.ping_group_range` |
//! | `mptcp4-listen:127.0.0.1:0`, `mptcp6-listen:[::1]:0` | an MPTCP listener (`listener`) |
//! | `udplite4:127.0.0.1:0`, `udplite6:[::1]:0` | a bound UDP-Lite socket (`socket`) |
//! | `raw4:127.0.0.1:0`, `raw6:[::1]:0` | a raw socket of protocol 253 bound to the address (`socket`) |
//! | `icmp4-unbound`, `icmp6-unbound` | a ping socket never bound nor used: in no table (`socket`, no address) |
//! | `netlink:PROTO` | an AF_NETLINK raw socket of netlink protocol PROTO (a number: 0 is `NETLINK_ROUTE`), bound to the port id the kernel picks (`socket`, its `port_id`) |
//! | `udp4-unbound`, `udp6-unbound`, `unix-dgram-unbound` | a datagram socket never bound nor connected (`socket`) |
//! | `unix-listen:/path`, `unix-abstract-listen:name` | a unix stream listener (`listener`) |
//! | `unix-conn:/path` | a unix listener on the path, a client connected to it and the accepted server (`listener`, `client`, `server`) |
//! | `unix-pair` | a unix stream socketpair (`a`, `b`) |
//! | `unix-pairs:N` | N socketpairs (`a`, `b`, `a`, `b`, ...) |
//! | `unix-dgram:/path` | a bound unix datagram socket (`socket`) |
//! | `timewait:ADDR` | a loopback connection closed active side first: the client's end stays in TIME_WAIT (`timewait`, no fd) |
//! | `finwait2:ADDR` | a connection whose client closed and whose server did not: the client's end is an orphan in FIN_WAIT2 (`finwait2`, no fd), the server's end is held in CLOSE_WAIT (`server`) |
//! | `fork` | forks a child that keeps every socket opened so far (its pid is `child_pid`) |
//! | `file-named-like-socket:N` | a regular file in the current directory literally named `socket:[<inode of item N's first socket>]`, held open |
//! | `comm:NAME` | sets the command name (`PR_SET_NAME`; at most 15 bytes are kept) |
//! | `setuid:UID` | drops to uid and gid UID (later sockets are created as that user) |
//!
//! The default command name is `sockholder`.

pub mod holder;
pub mod sampler;

use serde::{Deserialize, Serialize};

/// Environment variable that turns a process running [`holder::run_if_requested`] into a holder.
/// Its arguments (after argv\[0\]) are the specs.
pub const HOLDER_ENV: &str = "SOCKSTAT_TESTKIT_HOLDER";

/// An address as the holder saw it with `getsockname`/`getpeername`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Addr {
    /// IP address (inet sockets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Port (inet sockets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Unix path, or `@name` for an abstract name (absent for an unnamed unix socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A netlink socket's port id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_id: Option<u32>,
}

impl Addr {
    /// The port, panicking when there is none (inet addresses always have one).
    pub fn port(&self) -> u16 {
        self.port.expect("an inet address")
    }

    /// The address, panicking when there is none.
    pub fn address(&self) -> &str {
        self.address.as_deref().expect("an inet address")
    }
}

/// One socket end the holder made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sock {
    /// What this end is in its item (`listener`, `client`, `server`, `timewait`, ...).
    pub role: String,
    /// The fd holding it in the holder; `None` when no fd holds it (TIME_WAIT, accept queue).
    pub fd: Option<i32>,
    /// The socket's inode (`fstat`), `None` when there is no fd.
    pub inode: Option<u64>,
    /// Local address.
    pub local: Option<Addr>,
    /// Peer address, when connected.
    pub peer: Option<Addr>,
}

impl Sock {
    /// The local port (inet sockets).
    pub fn port(&self) -> u16 {
        self.local.as_ref().expect("local address").port()
    }

    /// The fd, panicking when no fd holds the socket.
    pub fn fd(&self) -> i32 {
        self.fd.expect("a held socket")
    }

    /// The inode, panicking when no fd holds the socket.
    pub fn inode(&self) -> u64 {
        self.inode.expect("a held socket")
    }
}

/// A regular file the holder keeps open (`file-named-like-socket`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldFile {
    /// The fd holding it.
    pub fd: i32,
    /// Its absolute path.
    pub path: String,
    /// The inode its name mentions (`socket:[N]`).
    pub named_inode: u64,
}

/// What one spec produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// The spec as given.
    pub spec: String,
    /// The spec's kind (the part before the first `:`).
    pub kind: String,
    /// Socket ends, in the order of the table above.
    pub socks: Vec<Sock>,
    /// The held file, for `file-named-like-socket`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<HeldFile>,
}

impl Item {
    /// The end with this role (the first one).
    pub fn role(&self, role: &str) -> &Sock {
        self.socks
            .iter()
            .find(|s| s.role == role)
            .unwrap_or_else(|| panic!("item {} has no {role} end: {self:?}", self.spec))
    }

    /// The first end.
    pub fn sock(&self) -> &Sock {
        self.socks
            .first()
            .unwrap_or_else(|| panic!("item {} has no socket", self.spec))
    }
}

/// The one JSON line a holder prints once every spec is done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The holder's pid.
    pub pid: u32,
    /// The forked child's pid (`fork`).
    pub child_pid: Option<u32>,
    /// The holder's effective uid at the end.
    pub uid: u32,
    /// One entry per spec, in order.
    pub items: Vec<Item>,
}

impl Report {
    /// Item `i`.
    pub fn item(&self, i: usize) -> &Item {
        &self.items[i]
    }

    /// The first item of this kind.
    pub fn kind(&self, kind: &str) -> &Item {
        self.items
            .iter()
            .find(|i| i.kind == kind)
            .unwrap_or_else(|| panic!("no {kind} item in {self:?}"))
    }
}
