//! Issue 27 item 1: no way in through the privileges sockstat is given. A copy of the binary
//! with the README's file capabilities (`cap_sys_ptrace,cap_dac_read_search+ep`), and one
//! installed setuid root (which SECURITY.md forbids, and which must still not open a door), run
//! as uid 65534 against files only root may read: every input that names a path, and every
//! test hook, is refused (one line, exit status 2) or is opened with uid 65534's own rights, so
//! the secret's text never appears on stdout or stderr. The real `/proc` listing still names
//! the holders of root's sockets with the capabilities. Root given a hostile `--proc-root`
//! tree (links where a real `/proc` has none) is not redirected either. Every environment
//! variable the code reads is one SECURITY.md lists.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use crate::common::*;
use crate::serve::which;

const NOBODY: u32 = 65534;

/// Files only root may read, a directory of uid 65534's own, and the privileged copies.
struct Fixture {
    dir: tempfile::TempDir,
    /// The text that must never come out.
    token: String,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempdir(); // 0755
        let token = format!("S3CRET-{}-{}", std::process::id(), unique());
        let d = dir.path();
        // A password-file-like secret, mode 0600, in a directory anyone may search.
        std::fs::write(
            d.join("secret"),
            format!("root:$6${token}$hash:19000:0:99999:7:::\n{token}: second line\n"),
        )
        .unwrap();
        set_mode(&d.join("secret"), 0o600);
        // A private directory (0700): a web configuration, a key and a TLS certificate in it,
        // readable only by whoever can search it.
        let private = d.join("private");
        std::fs::create_dir(&private).unwrap();
        std::fs::write(
            private.join("web.yml"),
            format!("basic_auth_users:\n  {token}: '$2y$10${token}'\n"),
        )
        .unwrap();
        set_mode(&private.join("web.yml"), 0o644);
        set_mode(&private, 0o700);
        // uid 65534's own directory.
        let mine = d.join("mine");
        std::fs::create_dir(&mine).unwrap();
        chown(&mine, NOBODY);
        Fixture { dir, token }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn p(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }

    /// A copy of the binary, root's, with the README's file capabilities.
    fn with_file_caps(&self) -> String {
        copy_with_file_caps(&self.path("sockstat-caps"))
    }

    /// A copy of the binary installed setuid root (what SECURITY.md says never to do).
    fn setuid_root(&self) -> String {
        let p = self.path("sockstat-suid");
        if !p.exists() {
            copy_sockstat(&p);
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o4755)).unwrap();
        }
        p.display().to_string()
    }

    /// Runs `bin ARGS` as uid 65534 (environment `env` added) and checks that the secret's
    /// text appears nowhere in what it printed.
    fn run_as_nobody(&self, bin: &str, args: &[&str], env: &[(&str, &str)]) -> Out {
        let mut cmd = sockstat(args).program(bin).prefix(&[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]);
        for (k, v) in env {
            cmd = cmd.env(k, v);
        }
        let out = cmd.run().no_panic();
        for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert!(
                !text.contains(&self.token),
                "{}: the secret came out on {stream}:\n{text}",
                out.what
            );
        }
        out
    }
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::chown(p, Some(uid), Some(uid)).expect("chown");
}

/// A refusal: exit status 2, one line, naming `what` and saying why.
fn refused(out: &Out, what: &str) {
    assert_eq!(out.code, Some(2), "{}: {out:#?}", out.what);
    assert_eq!(
        out.stderr.lines().count(),
        1,
        "{}: {}",
        out.what,
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!("{what} is refused"))
            && out.stderr.contains("privileges you do not have"),
        "{}: {}",
        out.what,
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}: {}", out.what, out.stdout);
}

fn setcap_available() -> bool {
    which("setcap") || Path::new("/usr/sbin/setcap").exists() || Path::new("/sbin/setcap").exists()
}

/// A `/proc`-like tree of uid 65534's making: process 4242's `cmdline` and `comm` are links
/// to the secret, and its `fd/3` names the socket `inode` (a real listener of the caller's).
fn hostile_proc_tree(f: &Fixture, inode: u64) -> String {
    let root = f.path("mine/proc");
    let pid = root.join("4242");
    std::fs::create_dir_all(pid.join("fd")).unwrap();
    std::os::unix::fs::symlink(f.path("secret"), pid.join("cmdline")).unwrap();
    std::os::unix::fs::symlink(f.path("secret"), pid.join("comm")).unwrap();
    std::os::unix::fs::symlink(f.path("secret"), pid.join("status")).unwrap();
    std::os::unix::fs::symlink(format!("socket:[{inode}]"), pid.join("fd/3")).unwrap();
    // Its net directory too: the counters and socket tables read from it.
    std::fs::create_dir_all(root.join("net")).unwrap();
    for name in ["tcp", "snmp", "netstat"] {
        std::os::unix::fs::symlink(f.path("secret"), root.join("net").join(name)).unwrap();
    }
    for p in [&root, &pid, &pid.join("fd"), &root.join("net")] {
        let _ = std::os::unix::fs::lchown(p, Some(NOBODY), Some(NOBODY));
    }
    root.display().to_string()
}

#[test]
fn with_file_capabilities_no_input_reaches_a_root_only_file() {
    require_root!("with_file_capabilities_no_input_reaches_a_root_only_file (setcap, setpriv)");
    if !setcap_available() {
        eprintln!("SKIPPED: setcap not found (Debian package libcap2-bin)");
        return;
    }
    let f = Fixture::new();
    // File capabilities and setuid bits mean nothing on a nosuid mount.
    let st = rustix::fs::statvfs(f.dir.path()).expect("statvfs");
    if st.f_flag.contains(rustix::fs::StatVfsMountFlags::NOSUID) {
        eprintln!(
            "SKIPPED: {} is on a nosuid mount: file capabilities cannot be tested there",
            f.dir.path().display()
        );
        return;
    }
    let root_holder = Holder::spawn(&["comm:rootprobe", "tcp4-pair:127.0.0.1"]);
    let port = root_holder.item(1).sock().port().to_string();
    let client_id = root_holder.item(1).socks[1].inode().to_string();
    let secret = f.p("secret");
    let proc_tree = hostile_proc_tree(&f, root_holder.item(1).socks[0].inode());
    let mine = f.p("mine");

    for bin in [f.with_file_caps(), f.setuid_root()] {
        // Flags that would read or write a path the caller names with the privileges: refused,
        // at every place they are taken.
        let cases: Vec<(Vec<String>, &str)> = vec![
            (vec!["--proc-root".into(), proc_tree.clone()], "--proc-root"),
            (
                vec![
                    "-l".into(),
                    "-a".into(),
                    "--owner-scan".into(),
                    "proc".into(),
                    "--proc-root".into(),
                    proc_tree.clone(),
                ],
                "--proc-root",
            ),
            (
                vec!["diagnose".into(), "--proc-root".into(), proc_tree.clone()],
                "--proc-root",
            ),
            (
                vec!["--proc-root".into(), proc_tree.clone(), "diagnose".into()],
                "--proc-root",
            ),
            // Options the listing lacks before the subcommand's name are moved after it before
            // parsing: the check must see the same arrangement, not let it through unchecked.
            (
                vec![
                    "--interval".into(),
                    "0.1".into(),
                    "diagnose".into(),
                    "--proc-root".into(),
                    proc_tree.clone(),
                ],
                "--proc-root",
            ),
            (
                vec![
                    "trace".into(),
                    "--json".into(),
                    "--proc-root".into(),
                    proc_tree.clone(),
                ],
                "--proc-root",
            ),
            (
                vec!["counters".into(), "--proc-root".into(), proc_tree.clone()],
                "--proc-root",
            ),
            (
                vec!["ports".into(), "--proc-root".into(), proc_tree.clone()],
                "--proc-root",
            ),
            (
                vec![
                    "serve".into(),
                    "--listen".into(),
                    "127.0.0.1:0".into(),
                    "--proc-root".into(),
                    proc_tree.clone(),
                ],
                "--proc-root",
            ),
            (
                vec!["--replay-netlink".into(), f.p("private")],
                "--replay-netlink",
            ),
            (
                vec!["--record-netlink".into(), format!("{mine}/recorded")],
                "--record-netlink",
            ),
            (
                vec![
                    "diagnose".into(),
                    "--record-netlink".into(),
                    format!("{mine}/recorded"),
                ],
                "--record-netlink",
            ),
            (
                vec!["diagnose".into(), "--exact-locks".into()],
                "--exact-locks",
            ),
        ];
        for (args, flag) in &cases {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            refused(&f.run_as_nobody(&bin, &args, &[]), flag);
        }
        assert!(!f.path("mine/recorded").exists(), "nothing was recorded");

        // The test hook is refused too (it would pause a privileged scan on the caller's word).
        let out = f.run_as_nobody(
            &bin,
            &["-l"],
            &[("SOCKSTAT_TEST_PAUSE_AFTER_ITERATOR_MS", "5000")],
        );
        refused(&out, "SOCKSTAT_TEST_PAUSE_AFTER_ITERATOR_MS");

        // The web configuration, and every file it names, is read with the caller's rights:
        // a root-only file cannot be read (and its text is never quoted), nor one in a root-only
        // directory, nor a root-only file named inside the caller's own configuration.
        std::fs::write(
            f.path("mine/web.yml"),
            format!("tls_server_config:\n  cert_file: {secret}\n  key_file: {secret}\n"),
        )
        .unwrap();
        for (config, want) in [
            (
                secret.clone(),
                format!("cannot read {secret}: Permission denied"),
            ),
            (
                f.p("private/web.yml"),
                format!("cannot read {}: Permission denied", f.p("private/web.yml")),
            ),
            (
                f.p("mine/web.yml"),
                format!("cannot read cert_file {secret}: Permission denied"),
            ),
        ] {
            let out = f.run_as_nobody(
                &bin,
                &[
                    "serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--web.config.file",
                    &config,
                ],
                &[],
            );
            assert_eq!(out.code, Some(2), "{out:#?}");
            assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
            assert!(out.stderr.contains(&want), "want {want}: {}", out.stderr);
        }

        // trace -o writes the picture with the caller's rights: not into a root-only directory.
        let out = f.run_as_nobody(
            &bin,
            &[
                "trace",
                "--id",
                &client_id,
                "--duration",
                "0.5",
                "--interval",
                "0.1",
                "-o",
                &f.p("private/trace.svg"),
            ],
            &[],
        );
        // Denied to the caller: status 3, missing privileges (the man page's EXIT STATUS).
        assert_eq!(out.code, Some(3), "{out:#?}");
        assert!(
            out.stderr.contains("cannot write the picture") && out.stderr.contains("denied"),
            "{}",
            out.stderr
        );
        assert!(
            std::fs::read_dir(f.path("private")).unwrap().all(|e| !e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains("trace")),
            "nothing was written into the root-only directory"
        );
    }

    // What the capabilities are for still works: the real /proc, root's holder named.
    let out = f.run_as_nobody(
        &f.with_file_caps(),
        &["-l", "-a", "-p", &port, "--owner-scan", "proc", "--json"],
        &[],
    );
    assert_eq!(out.code, Some(0), "{out:#?}");
    let v = out.json();
    let owners: Vec<u64> = sockets(&v)
        .iter()
        .flat_map(|s| s["owners"].as_array().cloned().unwrap_or_default())
        .filter_map(|o| o["pid"].as_u64())
        .collect();
    assert!(
        owners.contains(&u64::from(root_holder.pid())),
        "root's holder is named with the capabilities: {}",
        out.stdout
    );
    assert!(out.stdout.contains("rootprobe"), "{}", out.stdout);
}

/// Root given a process tree someone else built (a "post-mortem tree" in a bug report): the
/// links a real `/proc` does not have are not followed, so its `cmdline`, `comm`, `status` and
/// counter files cannot make root's sockstat print a root-only file. The holder behind the
/// `fd` link (a real socket of root's) is still found.
#[test]
fn a_hostile_proc_root_cannot_redirect_roots_reads() {
    require_root!("a_hostile_proc_root_cannot_redirect_roots_reads (chown)");
    let f = Fixture::new();
    let h = Holder::spawn(&["tcp4-listen:127.0.0.1:0"]);
    let port = h.item(0).sock().port().to_string();
    let tree = hostile_proc_tree(&f, h.item(0).sock().inode());
    for args in [
        vec![
            "-l",
            "-a",
            "-p",
            &port,
            "--owner-scan",
            "proc",
            "--proc-root",
            &tree,
            "--json",
        ],
        vec![
            "-l",
            "-a",
            "-p",
            &port,
            "--source",
            "proc",
            "--proc-root",
            &tree,
        ],
        vec!["counters", "--proc-root", &tree],
        vec!["-l", "-a", "-Z", "--proc-root", &tree],
    ] {
        let out = sockstat(&args).run().no_panic();
        for text in [&out.stdout, &out.stderr] {
            assert!(!text.contains(&f.token), "{}: {text}", out.what);
        }
        if args.contains(&"--json") {
            assert_eq!(out.code, Some(0), "{out:#?}");
            let v = out.json();
            let s = sockets(&v)
                .iter()
                .find(|s| s["id"].as_u64() == Some(h.item(0).sock().inode()))
                .unwrap_or_else(|| panic!("the listener: {}", out.stdout));
            assert_eq!(s["owners"][0]["pid"], 4242, "{s}");
            assert!(s["owners"][0]["command"].is_null(), "{s}");
        }
    }
}

/// mimalloc, the live view's allocator, reads its options from `MIMALLOC_*` variables (any
/// case) when the program loads, and `MIMALLOC_VERBOSE` has it print addresses: a privileged
/// copy takes them out of its environment first. The same variables do reach an unprivileged
/// copy, so the check can fail.
#[test]
fn with_file_capabilities_the_allocators_variables_are_ignored() {
    require_root!("with_file_capabilities_the_allocators_variables_are_ignored (setcap, setpriv)");
    if !setcap_available() {
        eprintln!("SKIPPED: setcap not found (Debian package libcap2-bin)");
        return;
    }
    let f = Fixture::new();
    let env = [("MIMALLOC_VERBOSE", "1"), ("mimalloc_show_stats", "1")];
    let plain = f.path("sockstat-plain");
    copy_sockstat(&plain);
    let out = f.run_as_nobody(&plain.display().to_string(), &["--version"], &env);
    assert!(
        out.stderr.contains("mimalloc: process init: 0x"),
        "{}: the variables did not reach an unprivileged run: {}",
        out.what,
        out.stderr
    );
    let caps = f.with_file_caps();
    for args in [&["--version"][..], &["top", "--batch", "--count", "1"]] {
        let out = f.run_as_nobody(&caps, args, &env);
        assert_eq!(out.code, Some(0), "{}: {out:#?}", out.what);
        assert!(
            !out.stderr.to_ascii_lowercase().contains("mimalloc"),
            "{}: the caller's MIMALLOC_* steered a privileged run: {}",
            out.what,
            out.stderr
        );
    }
}

/// Every environment variable the command and the library read (outside tests) is one
/// SECURITY.md lists with what it does under file capabilities. A new one fails here until it is
/// documented (and, if it can steer a privileged run, refused).
#[test]
fn every_environment_variable_read_is_listed_in_security_md() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let security = std::fs::read_to_string(root.join("SECURITY.md")).expect("SECURITY.md");
    let mut files = Vec::new();
    for dir in [
        "src",
        "crates/sockstat/src",
        "crates/wire/src",
        "python/src",
    ] {
        collect_rs(&root.join(dir), &mut files);
    }
    let mut names = std::collections::BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        // The code after `#[cfg(test)]` at the start of a line is a file's test module.
        let code = text.split("\n#[cfg(test)]").next().unwrap_or(&text);
        for line in code.lines() {
            if !(line.contains("env::var") || line.contains("var_os(")) {
                continue;
            }
            for lit in line.split('"').skip(1).step_by(2) {
                if lit.len() > 2 && lit.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
                    names.insert(lit.to_string());
                }
            }
        }
        // Names read through a list (the malloc tunables, the test hooks).
        for marker in ["MALLOC_", "GLIBC_TUNABLES", "SOCKSTAT_TEST_"] {
            for lit in code.split('"').skip(1).step_by(2) {
                if lit.starts_with(marker)
                    && lit.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
                {
                    names.insert(lit.to_string());
                }
            }
        }
    }
    for must in ["NO_COLOR", "TERM", "SOCKSTAT_TIMINGS"] {
        assert!(names.contains(must), "the scan missed {must}: {names:?}");
    }
    for name in &names {
        assert!(
            security.contains(&format!("`{name}`")),
            "{name} is read by the code but SECURITY.md does not list it"
        );
    }
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_rs(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
