//! The systemd unit the .deb installs (contrib/systemd/sockstat-exporter.service), alone and with
//! the drop-in for every zone (contrib/systemd/zones.conf, `serve -Z`): `systemd-analyze verify`
//! accepts them in a scratch root holding the binary where the unit expects it (and rejects a
//! broken copy, so the check can fail), `systemd-analyze security` rates their exposure, and
//! their capability lines are exactly what the exporter keeps (tests/it/serve_privileges.rs runs
//! the exporter with those credentials). The machines this runs on have no systemd as PID 1, so
//! the unit itself is not started here.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::common::*;
use crate::serve::which;

const UNIT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/contrib/systemd/sockstat-exporter.service"
);

const ZONES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/contrib/systemd/zones.conf");

fn unit() -> String {
    std::fs::read_to_string(UNIT).expect("the unit file")
}

fn zones_dropin() -> String {
    std::fs::read_to_string(ZONES).expect("the drop-in")
}

/// The values of `key=` lines in the unit.
fn values(text: &str, key: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(str::to_string)
        .collect()
}

/// A scratch root with the unit (as `text`) and the binary where the package puts them; returns
/// the root and the unit's path in it.
fn root_with(text: &str) -> (tempfile::TempDir, String) {
    let root = tempdir();
    let units = root.path().join("usr/lib/systemd/system");
    std::fs::create_dir_all(&units).unwrap();
    std::fs::create_dir_all(root.path().join("usr/bin")).unwrap();
    std::fs::copy(SOCKSTAT, root.path().join("usr/bin/sockstat")).expect("copy the binary");
    let unit = units.join("sockstat-exporter.service");
    std::fs::write(&unit, text).unwrap();
    let unit = unit.to_str().unwrap().to_string();
    (root, unit)
}

/// [`root_with`], and `dropin` installed as the unit's drop-in `zones.conf`.
fn root_with_dropin(text: &str, dropin: &str) -> (tempfile::TempDir, String) {
    let (root, unit) = root_with(text);
    let dir = root
        .path()
        .join("usr/lib/systemd/system/sockstat-exporter.service.d");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("zones.conf"), dropin).unwrap();
    (root, unit)
}

/// `systemd-analyze security --offline` of a unit in a root: its overall exposure and the lines
/// it printed.
fn security(root: &Path, unit: &str) -> (f64, String) {
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes"])
        .arg(format!("--root={}", root.display()))
        .arg(unit)
        .output()
        .expect("systemd-analyze security");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let score: f64 = text
        .lines()
        .find_map(|l| l.split("sockstat-exporter.service: ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no exposure level in:\n{text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    (score, text)
}

/// `systemd-analyze verify` of a unit in a root: (success, what it printed).
pub fn verify(root: &Path, unit: &str) -> (bool, String) {
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", root.display()))
        .args(["--man=no", "--recursive-errors=no", unit])
        .output()
        .expect("systemd-analyze");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn systemd_analyze_verifies_the_unit() {
    if !which("systemd-analyze") {
        eprintln!("SKIPPED: systemd-analyze not found (Debian package systemd)");
        return;
    }
    let (root, path) = root_with(&unit());
    let (ok, said) = verify(root.path(), &path);
    assert!(
        ok && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );
    // The check can fail: a misspelt key, and a missing binary.
    let (bad_root, bad) = root_with(&unit().replace("ProtectSystem=", "ProtectSystm="));
    let (ok, said) = verify(bad_root.path(), &bad);
    assert!(!ok && said.contains("ProtectSystm"), "{said}");
    // The bounds are checked by systemd too: a value it cannot parse fails.
    for (line, value) in [("TasksMax=128", "many"), ("MemoryMax=1G", "1Q")] {
        let key = line.split('=').next().unwrap_or(line);
        let (bad_root, bad) = root_with(&unit().replace(line, &format!("{key}={value}")));
        let (ok, said) = verify(bad_root.path(), &bad);
        assert!(!ok && said.contains(value), "{key}={value}: {said}");
    }
    std::fs::remove_file(root.path().join("usr/bin/sockstat")).unwrap();
    let (ok, said) = verify(root.path(), &path);
    assert!(!ok && said.contains("/usr/bin/sockstat"), "{said}");

    // Exposure, as systemd rates it (0 = fully sandboxed, 10 = not at all); this unit scores
    // 2.2 with systemd 252: what stays open is what the exporter needs (the host's network and
    // process table, ptrace-read access, netlink).
    let (root, path) = root_with(&unit());
    let (score, text) = security(root.path(), &path);
    assert!(score <= 3.0, "exposure {score}:\n{text}");
    assert!(text.contains("✓ RestrictNamespaces=~net"), "{text}");
}

#[test]
fn systemd_analyze_verifies_the_unit_with_the_zones_dropin() {
    if !which("systemd-analyze") {
        eprintln!("SKIPPED: systemd-analyze not found (Debian package systemd)");
        return;
    }
    let (root, path) = root_with_dropin(&unit(), &zones_dropin());
    let (ok, said) = verify(root.path(), &path);
    assert!(
        ok && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );
    // The check reads the drop-in: a misspelt key in it fails.
    let (bad_root, bad) = root_with_dropin(
        &unit(),
        &zones_dropin().replace("AmbientCapabilities=", "AmbientCapabilitys="),
    );
    let (ok, said) = verify(bad_root.path(), &bad);
    assert!(!ok && said.contains("AmbientCapabilitys"), "{said}");
    // CAP_SYS_ADMIN and network namespaces cost 0.4 (2.6 with systemd 252); every other kind
    // of namespace stays forbidden.
    let (score, text) = security(root.path(), &path);
    assert!(score <= 3.0, "exposure {score}:\n{text}");
    assert!(text.contains("✗ RestrictNamespaces=~net"), "{text}");
    assert!(
        text.contains("✗ CapabilityBoundingSet=~CAP_SYS_ADMIN"),
        "{text}"
    );
    for other in ["user", "pid", "uts", "mnt", "cgroup", "ipc"] {
        assert!(
            text.contains(&format!("✓ RestrictNamespaces=~{other}")),
            "{other}:\n{text}"
        );
    }
}

#[test]
fn the_unit_grants_exactly_what_the_exporter_keeps_and_is_hardened() {
    let text = unit();
    let want: BTreeSet<&str> = ["CAP_DAC_READ_SEARCH", "CAP_SYS_PTRACE"].into();
    for key in ["CapabilityBoundingSet", "AmbientCapabilities"] {
        let v = values(&text, key);
        assert_eq!(v.len(), 1, "one {key}= line: {v:?}");
        let got: BTreeSet<&str> = v[0].split_whitespace().collect();
        assert_eq!(got, want, "{key}");
    }
    for line in [
        "DynamicUser=yes",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "RestartPreventExitStatus=2 3",
        // Bounds on what clients can make it use: 80 connection threads and a dozen of its own
        // (tests/it/serve_hostile.rs checks the exporter stays within TasksMax under attack).
        "TasksMax=128",
        "MemoryMax=1G",
        "ExecStart=/usr/bin/sockstat serve $ARGS",
        "EnvironmentFile=-/etc/default/sockstat-exporter",
        "WantedBy=multi-user.target",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line} in the unit");
    }
    assert_eq!(values(&text, "RestrictNamespaces"), vec!["yes"]);
    // The drop-in for -Z adds CAP_SYS_ADMIN to both lines (systemd adds up capability lines),
    // runs `serve -Z`, and allows joining network namespaces (and no other kind).
    let dropin = zones_dropin();
    let want_z: BTreeSet<&str> = ["CAP_DAC_READ_SEARCH", "CAP_SYS_PTRACE", "CAP_SYS_ADMIN"].into();
    for key in ["CapabilityBoundingSet", "AmbientCapabilities"] {
        let got: BTreeSet<String> = values(&text, key)
            .into_iter()
            .chain(values(&dropin, key))
            .flat_map(|v| v.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .collect();
        let got: BTreeSet<&str> = got.iter().map(String::as_str).collect();
        assert_eq!(got, want_z, "{key} with the drop-in");
    }
    assert_eq!(
        values(&dropin, "ExecStart"),
        vec!["", "/usr/bin/sockstat serve -Z $ARGS"]
    );
    // An empty assignment resets the unit's `yes`; then network namespaces only.
    assert_eq!(values(&dropin, "RestrictNamespaces"), vec!["", "net"]);
    // Nothing that would hide the processes or the network the exporter reports on.
    for key in [
        "PrivateNetwork",
        "PrivateUsers",
        "ProtectProc",
        "ProcSubset",
    ] {
        assert!(values(&text, key).is_empty(), "{key}= must stay unset");
    }
}
