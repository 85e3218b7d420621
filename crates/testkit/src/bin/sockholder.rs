//! `sockholder SPEC...`: opens the described sockets, prints one JSON line (see
//! `sockstat_testkit::Report`) and holds everything until its standard input is closed.
//! See the crate documentation for the spec language.

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    sockstat_testkit::holder::main(&args)
}
