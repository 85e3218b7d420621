//! The Debian package: `cargo deb` builds it (from `[package.metadata.deb]` in Cargo.toml), it
//! is unpacked into a scratch root with `dpkg-deb -x`, every file is checked against the
//! repository's copy, the exporter's systemd unit is verified where it is installed and left
//! disabled by the maintainer scripts, and the installed binary runs.
//!
//! Opt-in: it runs only with `SOCKSTAT_TEST_DEB=1` and cargo-deb installed, because `cargo deb`
//! makes a release build (about a minute the first time, seconds when target/release is
//! current). `.ci/run` installs cargo-deb and sets the variable; elsewhere the test prints a
//! `SKIPPED:` line and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

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
    assert_eq!(field("Package").trim(), "sockstat");
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
        ("README.md", "usr/share/doc/sockstat/README.md"),
        ("SECURITY.md", "usr/share/doc/sockstat/SECURITY.md"),
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
            "usr/share/doc/sockstat/examples/sockstat.rules.yml",
        ),
        (
            "contrib/prometheus/sockstat.rules.test.yml",
            "usr/share/doc/sockstat/examples/sockstat.rules.test.yml",
        ),
        (
            "contrib/web-config.yml",
            "usr/share/doc/sockstat/examples/web-config.yml",
        ),
        (
            "contrib/systemd/zones.conf",
            "usr/share/doc/sockstat/examples/zones.conf",
        ),
    ] {
        let got = std::fs::read(installed(to)).unwrap_or_else(|e| panic!("{to}: {e}"));
        assert_eq!(got, repo(from), "{to} differs from {from}");
    }
    // The upstream changelog under the name Policy 12.7 gives it (cargo-deb may gzip it).
    let changelog = installed("usr/share/doc/sockstat/changelog");
    let changelog_gz = installed("usr/share/doc/sockstat/changelog.gz");
    let text = if changelog_gz.exists() {
        gunzip(&changelog_gz)
    } else {
        std::fs::read(&changelog).expect("usr/share/doc/sockstat/changelog")
    };
    assert_eq!(text, repo("CHANGELOG.md"));
    assert!(installed("usr/share/doc/sockstat/copyright").exists());

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
}
