//! Pure decoders and encoders for the Linux socket-inspection interfaces: `NETLINK_SOCK_DIAG`
//! (inet, unix, packet, netlink, and `SOCK_DESTROY`), `struct tcp_info`, the `INET_DIAG_REQ_BYTECODE` filter language, and
//! the `/proc/net` text formats.
//!
//! This crate does no I/O, makes no system calls, prints nothing and never panics on its
//! input (it is fuzzed, see `fuzz/`). Callers read bytes from the kernel or from recorded
//! fixtures and hand them here; every decoder borrows from the input instead of allocating per
//! socket. Field names follow the kernel's, without prefixes, with units in the name where
//! they are not obvious (`rtt_us`, `expires_ms`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bytes;
mod error;

pub mod bpf_asm;
pub mod btf;
pub mod bytecode;
pub mod cgroup;
pub mod fd_link;
pub mod inet_diag;
pub mod meminfo;
pub mod mountinfo;
pub mod netlink;
pub mod netlink_diag;
pub mod packet_diag;
pub mod proc_net;
pub mod proc_pid;
pub mod skb_drops;
pub mod snmp;
pub mod sock_destroy;
pub mod sysctl;
pub mod task_file;
pub mod tcp_events;
pub mod tcp_info;
pub mod unix_diag;

#[doc(hidden)]
pub mod fuzzing;

pub use error::DecodeError;
