//! The Debian package: `cargo deb` builds it (from `[package.metadata.deb]` in Cargo.toml), it
//! is unpacked into a scratch root with `dpkg-deb -x`, every file is checked against the
//! repository's copy, every file the man page, the unit and the examples name is in it, the
//! exporter's systemd unit is verified where it is installed and left disabled by the
//! maintainer scripts, and the installed binary runs. Then dpkg itself, on a database of its
//! own (`dpkg --root`), shows the conflict with Debian's unrelated package `sockstat`, which
//! installs /usr/bin/sockstat too: neither unpacks while the other is there.
//!
//! Opt-in: it runs only with `SOCKSTAT_TEST_DEB=1` and cargo-deb installed, because `cargo deb`
//! makes a release build (about a minute the first time, seconds when target/release is
//! current). `.ci/run` installs cargo-deb and sets the variable; elsewhere the test prints a
//! `SKIPPED:` line and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The package's name: Debian's `sockstat` is another program.
const PACKAGE: &str = "sockstat-rs";
/// Where its documentation is installed (Debian Policy 12.3).
const DOC: &str = "usr/share/doc/sockstat-rs";

fn skip(why: &str) {
    eprintln!("SKIPPED: the .deb package test: {why}");
}

fn run(c: &mut Command) -> String {
    let what = format!("{c:?}");
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The installed files a text names, as paths under the package's root: absolute paths under
/// /usr/share/doc, /usr/lib and /usr/bin (also in `file://` URLs; paths under /etc are the
/// administrator's to make), `man:sockstat(1)`, and
/// `doc/<name>.md`, `doc/<name>.json` or `doc/reference/<name>.md`, which the package keeps under its
/// documentation directory.
fn referenced_files(text: &str) -> Vec<String> {
    let mut out = vec![];
    let cut = |s: &str| -> String {
        s.trim_end_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '/' || c == '_'))
            .to_string()
    };
    let words = text.split(|c: char| c.is_whitespace() || "\"'`(),;=<>".contains(c));
    for w in words {
        let w = w.strip_prefix("file://").unwrap_or(w);
        if ["/usr/share/doc/", "/usr/lib/", "/usr/bin/"]
            .iter()
            .any(|p| w.starts_with(p))
        {
            out.push(cut(w).trim_start_matches('/').to_string());
        } else if let Some(i) = w.find("doc/") {
            let rest = cut(&w[i + 4..]);
            let depth_ok = !rest.contains('/')
                || rest
                    .strip_prefix("reference/")
                    .is_some_and(|r| !r.contains('/'));
            if (rest.ends_with(".md") || rest.ends_with(".json")) && depth_ok {
                out.push(format!("{DOC}/doc/{rest}"));
            }
        }
    }
    if text.contains("man:sockstat(1)") {
        out.push("usr/share/man/man1/sockstat.1.gz".into());
    }
    out.sort();
    out.dedup();
    out
}

fn gunzip(p: &Path) -> Vec<u8> {
    let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert_eq!(
        bytes.get(..2),
        Some(&[0x1f, 0x8b][..]),
        "{} is not gzip",
        p.display()
    );
    let out = Command::new("gzip")
        .arg("-dc")
        .arg(p)
        .output()
        .expect("gzip");
    assert!(out.status.success(), "gzip -dc {}", p.display());
    out.stdout
}

#[test]
fn deb_installs_the_binary_man_page_completions_docs_and_the_exporter_unit() {
    if std::env::var_os("SOCKSTAT_TEST_DEB").is_none_or(|v| v != "1") {
        return skip("set SOCKSTAT_TEST_DEB=1 to run it (it makes a release build)");
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let has_deb = Command::new(&cargo)
        .args(["deb", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_deb {
        return skip("cargo-deb is not installed (cargo install cargo-deb --locked)");
    }
    if Command::new("dpkg-deb").arg("--version").output().is_err() {
        return skip("dpkg-deb is not installed");
    }

    let out = tempfile::tempdir().expect("tempdir");
    run(Command::new(&cargo)
        .current_dir(ROOT)
        .args(["deb", "--quiet", "--output"])
        .arg(out.path()));
    let debs: Vec<PathBuf> = std::fs::read_dir(out.path())
        .expect("read output dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .collect();
    assert_eq!(
        debs.len(),
        1,
        "one .deb in {}: {debs:?}",
        out.path().display()
    );
    let deb = &debs[0];

    let field = |f: &str| run(Command::new("dpkg-deb").args(["-f"]).arg(deb).arg(f));
    // Not `sockstat`: Debian ships an unrelated package of that name, which `apt upgrade`
    // would have swapped in. Both install /usr/bin/sockstat, so ours conflicts with it; it
    // does not replace it (it is not its successor) nor provide it (it is another tool).
    assert_eq!(field("Package").trim(), PACKAGE);
    assert_eq!(field("Conflicts").trim(), "sockstat", "Conflicts");
    for f in ["Replaces", "Provides", "Breaks"] {
        assert!(
            !field(f)
                .split([',', '|'])
                .any(|p| p.trim().starts_with("sockstat")),
            "{f}: {}",
            field(f)
        );
    }
    assert!(
        field("Description").contains("Debian's"),
        "the description says why it conflicts: {}",
        field("Description")
    );
    // cargo-deb adds a Debian revision (`0.1.0-1`).
    let version = field("Version");
    let upstream = version.trim().split('-').next().unwrap_or_default();
    assert_eq!(upstream, env!("CARGO_PKG_VERSION"), "{version}");
    assert!(field("Depends").contains("libc6"), "{}", field("Depends"));

    let root = tempfile::tempdir().expect("tempdir");
    run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(root.path()));
    let installed = |p: &str| root.path().join(p);
    let repo = |p: &str| std::fs::read(Path::new(ROOT).join(p)).expect(p);

    // The man page, gzipped as Debian Policy 12.1 wants, and the same text as doc/.
    assert_eq!(
        gunzip(&installed("usr/share/man/man1/sockstat.1.gz")),
        repo("doc/sockstat.1")
    );
    for (from, to) in [
        (
            "doc/completions/sockstat.bash",
            "usr/share/bash-completion/completions/sockstat",
        ),
        (
            "doc/completions/sockstat.zsh",
            "usr/share/zsh/vendor-completions/_sockstat",
        ),
        (
            "doc/completions/sockstat.fish",
            "usr/share/fish/vendor_completions.d/sockstat.fish",
        ),
        ("README.md", "usr/share/doc/sockstat-rs/README.md"),
        ("SECURITY.md", "usr/share/doc/sockstat-rs/SECURITY.md"),
        (
            "contrib/systemd/sockstat-exporter.service",
            "usr/lib/systemd/system/sockstat-exporter.service",
        ),
        (
            "contrib/systemd/sockstat-exporter.default",
            "etc/default/sockstat-exporter",
        ),
        (
            "contrib/prometheus/sockstat.rules.yml",
            "usr/share/doc/sockstat-rs/examples/sockstat.rules.yml",
        ),
        (
            "contrib/prometheus/sockstat.rules.test.yml",
            "usr/share/doc/sockstat-rs/examples/sockstat.rules.test.yml",
        ),
        (
            "contrib/web-config.yml",
            "usr/share/doc/sockstat-rs/examples/web-config.yml",
        ),
        (
            "contrib/systemd/zones.conf",
            "usr/share/doc/sockstat-rs/examples/zones.conf",
        ),
    ] {
        let got = std::fs::read(installed(to)).unwrap_or_else(|e| panic!("{to}: {e}"));
        assert_eq!(got, repo(from), "{to} differs from {from}");
    }
    // The upstream changelog under the name Policy 12.7 gives it (cargo-deb may gzip it).
    let changelog = installed("usr/share/doc/sockstat-rs/changelog");
    let changelog_gz = installed("usr/share/doc/sockstat-rs/changelog.gz");
    let text = if changelog_gz.exists() {
        gunzip(&changelog_gz)
    } else {
        std::fs::read(&changelog).expect("usr/share/doc/sockstat-rs/changelog")
    };
    assert_eq!(text, repo("CHANGELOG.md"));
    assert!(installed(&format!("{DOC}/copyright")).exists());
    // doc/ and doc/reference/ as in the source, so that the references below resolve.
    let mut docs = 0;
    for dir in ["doc", "doc/reference"] {
        for e in std::fs::read_dir(Path::new(ROOT).join(dir)).expect(dir) {
            let name = e
                .expect("entry")
                .file_name()
                .into_string()
                .expect("UTF-8 name");
            if name.ends_with(".md") || name.ends_with(".json") {
                let to = format!("{DOC}/{dir}/{name}");
                let got = std::fs::read(installed(&to)).unwrap_or_else(|e| panic!("{to}: {e}"));
                assert_eq!(got, repo(&format!("{dir}/{name}")), "{to}");
                docs += 1;
            }
        }
    }
    assert!(docs >= 10, "{docs} documents under doc/");
    // Every file the installed man page, unit, defaults and examples name is installed.
    let man = String::from_utf8(gunzip(&installed("usr/share/man/man1/sockstat.1.gz")))
        .expect("UTF-8 man page");
    let mut named = 0;
    for (what, text) in [
        ("the man page", man.replace("\\-", "-")),
        (
            "the unit",
            std::fs::read_to_string(installed(
                "usr/lib/systemd/system/sockstat-exporter.service",
            ))
            .expect("unit"),
        ),
        (
            "the defaults",
            std::fs::read_to_string(installed("etc/default/sockstat-exporter")).expect("defaults"),
        ),
        (
            "zones.conf",
            std::fs::read_to_string(installed(&format!("{DOC}/examples/zones.conf")))
                .expect("zones.conf"),
        ),
        (
            "web-config.yml",
            std::fs::read_to_string(installed(&format!("{DOC}/examples/web-config.yml")))
                .expect("web-config.yml"),
        ),
        (
            "sockstat.rules.yml",
            std::fs::read_to_string(installed(&format!("{DOC}/examples/sockstat.rules.yml")))
                .expect("sockstat.rules.yml"),
        ),
    ] {
        for path in referenced_files(&text) {
            named += 1;
            assert!(
                installed(&path).exists(),
                "{what} names {path}, which the package does not install"
            );
        }
    }
    // The man page's doc/ references, the unit's Documentation= pages, serve.md: not vacuous.
    assert!(named >= 8, "{named} references");

    // The exporter's unit is installed disabled and stopped: the maintainer scripts register
    // it with systemd but enable it only if the administrator had (an upgrade), and start
    // nothing; /etc/default/sockstat-exporter is a conffile (the administrator's flags survive
    // upgrades). systemd-analyze verifies the unit as installed, next to the installed binary.
    let control = tempfile::tempdir().expect("tempdir");
    run(Command::new("dpkg-deb")
        .arg("-e")
        .arg(deb)
        .arg(control.path()));
    let script =
        |name: &str| std::fs::read_to_string(control.path().join(name)).unwrap_or_default();
    let postinst = script("postinst");
    assert!(
        postinst.contains("deb-systemd-helper update-state sockstat-exporter.service"),
        "{postinst}"
    );
    for line in postinst.lines() {
        let l = line.trim();
        if l.starts_with("deb-systemd-helper enable") {
            assert!(
                postinst.contains("was-enabled sockstat-exporter.service"),
                "{postinst}"
            );
        }
        assert!(
            !l.contains("deb-systemd-invoke start") && !l.contains("systemctl start"),
            "postinst starts the exporter: {postinst}"
        );
    }
    assert_eq!(
        script("conffiles").trim(),
        "/etc/default/sockstat-exporter",
        "conffiles"
    );
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok()
    {
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(format!("--root={}", root.path().display()))
            .args(["--man=no", "--recursive-errors=no"])
            .arg(installed(
                "usr/lib/systemd/system/sockstat-exporter.service",
            ))
            .output()
            .expect("systemd-analyze");
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "systemd-analyze verify: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        eprintln!("SKIPPED: systemd-analyze not found; the installed unit was not verified");
    }

    // The installed binary runs.
    let bin = installed("usr/bin/sockstat");
    let version = run(Command::new(&bin).arg("--version"));
    assert_eq!(
        version.trim(),
        format!("sockstat {}", env!("CARGO_PKG_VERSION"))
    );
    run(Command::new(&bin).args(["-l", "-P", "tcp", "--no-owners"]));

    conflicts_with_debians_sockstat(deb);
}

/// A dpkg database of its own under a scratch root (`dpkg --root`).
fn dpkg_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("tempdir");
    let db = root.path().join("var/lib/dpkg");
    for d in ["info", "updates", "triggers"] {
        std::fs::create_dir_all(db.join(d)).expect("dpkg database");
    }
    for f in ["status", "available"] {
        std::fs::write(db.join(f), "").expect("dpkg database");
    }
    root
}

/// `dpkg --root ROOT --unpack DEB` (no maintainer script needs to run to unpack either package).
fn unpack(root: &Path, deb: &Path) -> std::process::Output {
    let mut c = Command::new("dpkg");
    c.arg(format!("--root={}", root.display()))
        .arg("--log=/dev/null")
        .arg("--unpack")
        .arg(deb);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        c.arg("--force-not-root");
    }
    c.output().expect("dpkg")
}

/// Debian's package `sockstat` (0.4.1-1 in bookworm, a C tool) installs /usr/bin/sockstat. A
/// stand-in with its name and that file, and ours, refuse each other in dpkg, whichever comes
/// first; each alone unpacks, and /usr/bin/sockstat is then its.
fn conflicts_with_debians_sockstat(ours: &Path) {
    let work = tempfile::tempdir().expect("tempdir");
    let pkg = work.path().join("sockstat");
    std::fs::create_dir_all(pkg.join("DEBIAN")).expect("mkdir");
    std::fs::create_dir_all(pkg.join("usr/bin")).expect("mkdir");
    std::fs::write(
        pkg.join("DEBIAN/control"),
        "Package: sockstat\nVersion: 0.4.1-1\nArchitecture: all\nMaintainer: test <test@example.org>\n\
         Description: stand-in for Debian's sockstat\n",
    )
    .expect("control");
    std::fs::write(pkg.join("usr/bin/sockstat"), "#!/bin/sh\necho debian\n").expect("file");
    let theirs = work.path().join("sockstat_0.4.1-1_all.deb");
    run(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-b"])
        .arg(&pkg)
        .arg(&theirs));

    for (first, second, refused) in [(&*theirs, ours, PACKAGE), (ours, &*theirs, "sockstat")] {
        let root = dpkg_root();
        let out = unpack(root.path(), first);
        assert!(
            out.status.success(),
            "unpacking {} alone: {}",
            first.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let owner = run(Command::new("dpkg")
            .arg(format!("--root={}", root.path().display()))
            .args(["-S", "/usr/bin/sockstat"]));
        assert!(
            owner.starts_with(if refused == PACKAGE {
                "sockstat:"
            } else {
                PACKAGE
            }),
            "{owner}"
        );
        let out = unpack(root.path(), second);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{} unpacked beside the other",
            second.display()
        );
        assert!(
            err.contains("conflicting packages") && err.contains(refused),
            "dpkg said: {err}"
        );
        let owner = run(Command::new("dpkg")
            .arg(format!("--root={}", root.path().display()))
            .args(["-S", "/usr/bin/sockstat"]));
        assert!(!owner.starts_with(&format!("{refused}:")), "{owner}");
    }
}
