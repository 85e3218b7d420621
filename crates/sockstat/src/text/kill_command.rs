//! The `sockstat kill` command line that closes the sockets a finding is about: spelled here,
//! on the ground floor, so the diagnosis rules and the port analysis print it without reaching
//! up to the kill use case ([`crate::kill`]), which closes sockets.

use std::net::IpAddr;

use crate::model::{Endpoint, Socket, State};

/// What a finding asks to close, for [`command_for`].
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// One connection, named by its cookie (a receiver that stopped reading for long).
    Connection(&'a Socket),
    /// Every socket in `state` on one port, optionally on a local address and of one process
    /// (CLOSE_WAIT piling up in a server, or in a client's pool).
    StateOnPort {
        /// The state (CLOSE_WAIT, ...).
        state: State,
        /// The local address, when the finding is about one.
        local: Option<IpAddr>,
        /// The port: the local one (a server's connections accepted on it) when `server`, else
        /// the remote one (a client's connections to it).
        port: u16,
        /// Whether `port` is the local port.
        server: bool,
        /// The process holding them, when known.
        pid: Option<u32>,
    },
    /// The TIME-WAIT entries from a local address to one destination (ephemeral ports running
    /// out).
    TimeWaitTo {
        /// The local address, when the finding is about one.
        local: Option<IpAddr>,
        /// The destination address.
        remote: IpAddr,
        /// The destination port.
        remote_port: u16,
    },
}

/// Quotes one word for a POSIX shell when it needs it. Zone names come from container
/// runtimes and are not trusted: anything outside a safe set is single-quoted, and a name
/// with a control character is not printed at all (the caller uses the namespace inode).
fn shell_word(w: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "._:/@%+=,-".contains(c);
    if !w.is_empty() && w.chars().all(safe) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// The `sockstat kill` command line that closes what a finding is about. `zone` is the zone
/// the finding was made in, when not this process's own namespace: `-z` with its name (or its
/// namespace inode when the name is not printable).
pub fn command_for(target: &Target<'_>, zone: Option<&crate::zone::Zone>) -> String {
    let mut args: Vec<String> = vec!["sockstat".into(), "kill".into()];
    match target {
        Target::Connection(s) => match s.cookie {
            Some(c) => {
                args.push("--cookie".into());
                args.push(c.to_string());
            }
            None => {
                // Without a cookie (a /proc listing), name it by both ends.
                if let Endpoint::Inet { addr, port } = s.local {
                    args.extend([
                        "--src".into(),
                        addr.to_string(),
                        "--sport".into(),
                        port.to_string(),
                    ]);
                }
                if let Some(Endpoint::Inet { addr, port }) = &s.remote {
                    args.extend([
                        "--dst".into(),
                        addr.to_string(),
                        "--dport".into(),
                        port.to_string(),
                    ]);
                }
                args.extend(["--state".into(), s.state.name().into_owned()]);
            }
        },
        Target::StateOnPort {
            state,
            local,
            port,
            server,
            pid,
        } => {
            args.extend(["--state".into(), state.name().into_owned()]);
            if let Some(a) = local.filter(|a| !a.is_unspecified()) {
                args.extend(["--src".into(), a.to_string()]);
            }
            let side = if *server { "--sport" } else { "--dport" };
            args.extend([side.into(), port.to_string()]);
            if let Some(p) = pid {
                args.extend(["--pid".into(), p.to_string()]);
            }
        }
        Target::TimeWaitTo {
            local,
            remote,
            remote_port,
        } => {
            args.extend(["--state".into(), "TIME_WAIT".into()]);
            if let Some(a) = local.filter(|a| !a.is_unspecified()) {
                args.extend(["--src".into(), a.to_string()]);
            }
            args.extend([
                "--dst".into(),
                remote.to_string(),
                "--dport".into(),
                remote_port.to_string(),
            ]);
        }
    }
    if let Some(z) = zone {
        let printable = !z.name.is_empty() && !z.name.chars().any(char::is_control);
        let spec = match (printable, z.netns_inode) {
            (true, _) | (false, None) => shell_word(&z.name),
            (false, Some(ino)) => ino.to_string(),
        };
        args.extend(["-z".into(), spec]);
    }
    args.join(" ")
}
