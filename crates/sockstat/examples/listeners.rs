//! Prints every listening socket with the processes that hold it (command, pid, fd, user), and
//! what these privileges could not see: `sockstat -l` in a few lines of the library.
//!
//! Run with `cargo run -p sockstat --example listeners`; as root (or with CAP_SYS_PTRACE and
//! CAP_DAC_READ_SEARCH) it sees every process's holders, as a user its own.

fn main() -> Result<(), sockstat::Error> {
    let mut q = sockstat::Query::new();
    q.select.listening = true;
    let snap = sockstat::collect(&q)?;
    for s in &snap.sockets {
        let mut holders = snap.holders(s).peekable();
        if holders.peek().is_none() {
            // No holder: none exists (a kernel socket), or it is a process we may not inspect.
            println!("{:<8} {:<30} -", s.proto_label(), s.local.to_string());
        }
        for h in holders {
            // `Display` of a command escapes control characters as the listing does.
            let command = h
                .command
                .map(|c| c.to_string())
                .unwrap_or_else(|| "?".into());
            let user = match (h.user, h.uid) {
                (Some(name), _) => name.to_string(),
                (None, Some(uid)) => uid.to_string(),
                (None, None) => "?".into(),
            };
            println!(
                "{:<8} {:<30} {command}[{}] fd {} user {user}",
                s.proto_label(),
                s.local.to_string(),
                h.pid,
                h.fd
            );
        }
    }
    for w in &snap.warnings {
        eprintln!("warning: {}", w.message);
    }
    Ok(())
}
