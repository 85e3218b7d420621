//! Prints every listening port with the processes behind it: what the seed library's
//! `GetOpenPorts` was meant to be (listeners only, every holder; doc/reference/cases.md#case-002-linux-open-ports).
//!
//! Run with `cargo run -p sockstat --example open_ports`.

fn main() -> Result<(), sockstat::Error> {
    for p in sockstat::listening_ports()? {
        let who: Vec<String> = p
            .processes
            .iter()
            .map(|(pid, cmd)| format!("{}[{pid}]", cmd.as_deref().unwrap_or("?")))
            .collect();
        let holders = if who.is_empty() {
            "-".to_string()
        } else {
            who.join(",")
        };
        println!(
            "{:<7} {:<40} {holders}",
            p.proto.name(),
            format!("{}:{}", p.address, p.port)
        );
    }
    Ok(())
}
