//! `sockstat drops [SECONDS]`: packets the kernel dropped over the interval, by drop reason,
//! protocol and port, from a BPF program on the `skb:kfree_skb` tracepoint
//! (`sockstat::sys::skb_drops`).

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use sockstat::run::drops::{self, DropCounter};
use sockstat::{PortSet, Proto};

use crate::cli::{protos, List};
use crate::output::Waits;

/// Flags of `sockstat drops`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = concat!("\
Counts every packet the kernel frees as dropped (the skb:kfree_skb tracepoint and its drop
reason, Linux 5.17+), by reason, protocol and port, over SECONDS (or until Ctrl-C), in every
network namespace of the host. The port is the local port of the socket the packet was for when
the kernel knew it (Linux 6.8+ names the receiving socket), otherwise the destination port in
the packet ('dst N'). NOT_SPECIFIED is a drop whose code path gives no reason.

Examples:
  sockstat drops 10                  what was dropped in the next 10 seconds
  sockstat drops 30 -P tcp -p 443    TCP drops to or from port 443
  sockstat drops 5 --json

Needs CAP_BPF and CAP_PERFMON (or root).

", crate::cli::exit_statuses!()))]
pub struct DropsArgs {
    /// How long to count, in seconds (default 10).
    #[arg(value_name = "SECONDS", value_parser = crate::output::parse_seconds)]
    pub seconds: Option<f64>,
    /// Only drops of these protocols (tcp, udp, udplite, sctp; comma-separated).
    #[arg(short = 'P', value_name = "PROTOS", value_parser = protos, help_heading = "Filters")]
    pub protos: Option<List<Proto>>,
    /// Only drops whose port is in PORTS (e.g. 22,80,8000-8100).
    #[arg(short = 'p', value_name = "PORTS", value_parser = PortSet::parse, help_heading = "Filters")]
    pub ports: Option<PortSet>,
    /// One JSON document (schema version 1; see doc/json-schema.md).
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// Print help.
    #[arg(short = 'h', long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// Runs `sockstat drops`.
pub fn run(a: &DropsArgs) -> anyhow::Result<ExitCode> {
    let protos: Option<Vec<u8>> = match &a.protos {
        None => None,
        Some(l) => Some(
            l.0.iter()
                .map(|&p| {
                    drops::ip_protocol(p).ok_or_else(|| {
                        crate::usage(format!(
                            "drops are counted by IP protocol: -P takes tcp, udp, udplite or sctp, not {}",
                            p.name()
                        ))
                    })
                })
                .collect::<anyhow::Result<_>>()?,
        ),
    };
    let stop = crate::watch::stop_flag()?;
    let counter = DropCounter::start()
        .map_err(|u| anyhow::Error::new(u).context("cannot count dropped packets"))?;
    let seconds = a.seconds.unwrap_or(10.0);
    crate::output::announce_wait(
        Waits::Announced,
        &format!("counting dropped packets for {seconds} s"),
        "Ctrl-C stops early and shows what was counted",
    );
    let drops = drops::count(
        &counter,
        Duration::from_secs_f64(seconds),
        &stop,
        protos.as_deref(),
        a.ports.as_ref(),
    )?;
    let mut out = io::stdout().lock();
    if a.json {
        serde_json::to_writer(&mut out, &sockstat::render::drops::json(&drops))?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(sockstat::render::drops::text(&drops).as_bytes())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
