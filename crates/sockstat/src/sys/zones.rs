//! The sockets of the selected zones (network namespaces): each zone's dump run inside it, or,
//! where it may not be entered, its `/proc/PID/net` text read through a member process.

use std::collections::BTreeMap;

use crate::error::{Error, ErrorKind};
use crate::model::{Warning, WarningCode};
use crate::query::{Query, Source};
use crate::sys::{dump, netns};
use crate::zone::Zone;

/// Gathers the sockets of the selected zones (`None`: the namespace sockstat runs in), each
/// tagged with its zone key; with `census`, each zone's other tables' inodes too
/// ([`dump::gather`]).
pub(crate) fn gather(
    q: &Query,
    ext: u8,
    selected: Option<netns::SelectedZones>,
    census: bool,
) -> Result<(dump::Gathered, BTreeMap<u64, Zone>), Error> {
    let mut zones = BTreeMap::new();
    let Some((selected, mut warnings)) = selected else {
        let mut g = dump::gather(q, ext, &q.gather.proc_root.join("net"), census)?;
        g.interfaces = dump::interface_names(&g.sockets);
        return Ok((g, zones));
    };
    let mut all = dump::Gathered::default();
    let (mut fallback, mut skipped) = (Vec::new(), Vec::new());
    for t in selected {
        zones.insert(t.key, t.zone.clone());
        let thread_net = q.gather.proc_root.join("thread-self/net");
        let joined = netns::run_in(&t, || {
            let net = if t.own {
                q.gather.proc_root.join("net")
            } else {
                thread_net.clone()
            };
            dump::gather(q, ext, &net, census).map(|mut g| {
                g.interfaces = dump::interface_names(&g.sockets);
                g
            })
        });
        let mut g = match joined {
            Ok(g) => g?,
            // Gone since discovery (a container that stopped): not in this listing, and not
            // worth a warning.
            Err(why) if why.kind() == ErrorKind::Gone => continue,
            Err(why) => {
                // Not permitted to join: read its /proc/PID/net text through a member process.
                let pid = match netns::live_member(&t, &q.gather.proc_root) {
                    Ok(Some(pid)) => pid,
                    Ok(None) => {
                        skipped.push(format!(
                            "zone {}: {why}; no visible process in it",
                            t.zone.name
                        ));
                        continue;
                    }
                    Err(_) => continue,
                };
                let mut pq = q.clone();
                pq.gather.source = Source::Proc;
                let net = q.gather.proc_root.join(format!("{pid}/net"));
                match dump::gather(&pq, 0, &net, census) {
                    // Its member exited while it was read (an exited process's files read as
                    // absent, which is an empty list): gone, like a zone that cannot be entered.
                    Ok(_) if !net.join("tcp").exists() => continue,
                    Ok(g) => {
                        fallback.push(format!(
                            "zone {}: {why}; listed from /proc/{pid}/net",
                            t.zone.name
                        ));
                        g
                    }
                    // Its last member exited while it was read.
                    Err(e) if e.kind() == ErrorKind::Gone => continue,
                    Err(e) => return Err(e),
                }
            }
        };
        for s in &mut g.sockets {
            s.netns = Some(t.key);
        }
        all.sockets.append(&mut g.sockets);
        all.warnings.append(&mut g.warnings);
        all.hidden_time_wait += g.hidden_time_wait;
        all.left_out.append(&mut g.left_out);
        all.zone_interfaces
            .extend(g.interfaces.into_iter().map(|(i, n)| ((Some(t.key), i), n)));
    }
    if !fallback.is_empty() || !skipped.is_empty() {
        warnings.push(Warning {
            code: WarningCode::ZonesNotJoined,
            count: Some((fallback.len() + skipped.len()) as u64),
            message: format!(
                "{} zones could not be joined with these privileges: {} listed from /proc/PID/net text (no socket cookies, TCP internals or unix peers), {} with no visible process not listed; run as root to read them fully",
                fallback.len() + skipped.len(),
                fallback.len(),
                skipped.len()
            ),
            details: fallback.into_iter().chain(skipped).collect(),
        });
    }
    all.warnings.append(&mut warnings);
    Ok((all, zones))
}
