//! Prints a recorded sock_diag reply: `cargo run -p sockstat-wire --example dump_fixture -- FILE {inet|unix|packet}`.
//! Reads a file given on the command line; the library itself does no I/O.

use sockstat_wire::netlink::{classify, messages, Control};
use sockstat_wire::tcp_info::TcpInfo;
use sockstat_wire::{inet_diag, packet_diag, unix_diag};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(kind)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: dump_fixture FILE inet|unix|packet");
        std::process::exit(2);
    };
    let buf = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    };
    for m in messages(&buf) {
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                println!("error: {e}");
                break;
            }
        };
        match classify(&m) {
            Ok(Control::Data(p)) => match kind.as_str() {
                "inet" => match inet_diag::decode_msg(p) {
                    Ok(d) => {
                        println!("{d:?}");
                        if let Some(i) = d.attrs.info {
                            let t = TcpInfo::from_bytes(i);
                            let f: Vec<_> = t.fields().filter(|(_, v)| *v != Some(0)).collect();
                            println!("  tcp_info len {}: {f:?}", t.len());
                        }
                    }
                    Err(e) => println!("error: {e}"),
                },
                "unix" => println!("{:?}", unix_diag::decode_msg(p)),
                _ => println!("{:?}", packet_diag::decode_msg(p)),
            },
            c => println!("{c:?} flags {:#x}", m.flags),
        }
    }
}
