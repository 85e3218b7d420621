//! The library as a new user meets it: a crate of its own, outside this workspace, that depends
//! on `sockstat` by path and is built offline with the user's own `cargo`. Its programs are the
//! README's library example (every ```rust block of README.md, each as a `main`) and the first
//! program a newcomer writes from the crate's docs: print each listener with its process name.
//! The README's program is then run while this test holds a listener, and must name this
//! process as its holder.
//!
//! The build has its own target directory (`target/newcomer`), kept between runs so that only
//! the first run compiles the dependencies.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (this crate is `crates/sockstat`).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every ```rust block of a Markdown text.
fn rust_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        let fence = line.trim_start().starts_with("```");
        match &mut current {
            None if fence && line.trim_start().trim_start_matches('`').trim() == "rust" => {
                current = Some(String::new())
            }
            Some(block) if fence => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// A `main` around a fragment that uses `?`, as rustdoc wraps a doctest.
fn as_main(fragment: &str) -> String {
    format!("fn main() -> Result<(), Box<dyn std::error::Error>> {{\n{fragment}    Ok(())\n}}\n")
}

/// What a newcomer writes after reading the crate docs: the command of each listener's
/// holders, looked up by pid in the process table and printed with `to_string()` (the line
/// that did not compile while `RawString` had no `Display`), and the same through
/// `Snapshot::holders`.
const FIRST_PROGRAM: &str = r#"
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut q = sockstat::Query::new();
    q.select.listening = true;
    let snap = sockstat::collect(&q)?;
    for s in &snap.sockets {
        for o in &s.owners {
            let cmd = snap.processes.get(&o.pid).and_then(|p| p.command.as_ref()).map(|c| c.to_string());
            println!("{} {} {}", s.local, o.pid, cmd.unwrap_or_default());
        }
        for h in snap.holders(s) {
            let user = h.user.map(str::to_string).or(h.uid.map(|u| u.to_string()));
            println!("{} {} {} {} {:?}", s.local, h.pid, h.fd, h.command.map(|c| c.to_string()).unwrap_or_default(), user);
        }
    }
    Ok(())
}
"#;

#[test]
fn a_new_crate_builds_the_readme_example_and_the_first_program_and_lists_our_listener() {
    let root = workspace();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let examples = rust_blocks(&readme);
    assert!(
        !examples.is_empty(),
        "README.md has no ```rust block: the library section's example is gone"
    );

    let dir = tempfile::Builder::new()
        .prefix(&format!("sockstat-newcomer-{}-", std::process::id()))
        .tempdir()
        .expect("temp dir");
    let krate = dir.path();
    let library = Path::new(env!("CARGO_MANIFEST_DIR"))
        .canonicalize()
        .expect("crate dir");
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            "[package]\nname = \"newcomer\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\n\n[workspace]\n\n[dependencies]\nsockstat = {{ path = {:?} }}\n",
            library.display().to_string()
        ),
    )
    .unwrap();
    let bin = krate.join("src/bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (i, block) in examples.iter().enumerate() {
        std::fs::write(bin.join(format!("readme{i}.rs")), as_main(block)).unwrap();
    }
    std::fs::write(bin.join("first.rs"), FIRST_PROGRAM).unwrap();
    // The versions this workspace has locked (and downloaded): an offline build finds them.
    std::fs::copy(root.join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();

    let target = root.join("target/newcomer");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(&cargo)
        .args(["build", "--offline", "--bins", "--message-format=short"])
        .current_dir(krate)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "the newcomer's crate does not build:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The README's program, run while we hold a listener, names this process as its holder.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
    // The example's own format: the address, then the command and pid of its holder.
    let addr = format!("127.0.0.1:{port} ");
    let (comm, pid) = (comm.trim(), std::process::id().to_string());
    let run = Command::new(target.join("debug/readme0"))
        .output()
        .expect("run the README's example");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "readme0 failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains(&addr) && l.contains(comm) && l.contains(&pid)),
        "the README's example does not list our listener {addr}with its holder {comm} {pid}:\n{stdout}"
    );
    drop(listener);
}
