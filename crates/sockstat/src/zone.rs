//! Zones: a Linux network namespace is the analogue of an illumos zone or a FreeBSD vnet jail.
//! This module names them (pure: paths and file contents in, names out); `sys::netns` finds
//! them and reads their sockets.
//!
//! Naming order: the host namespace is `global` (illumos's name); a namespace that a container
//! lives in is named after the container (or its Kubernetes pod: a pod's containers share one
//! namespace); an `ip netns` namespace by its name; anything else by its inode.

use serde::Serialize;

/// What kind of zone a namespace is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ZoneKind {
    /// The host's namespace (that of pid 1).
    Global,
    /// A namespace bound under `/run/netns` by `ip netns add`.
    Netns,
    /// A Docker container (cgroup `docker-<id>.scope` or `/docker/<id>`).
    Docker,
    /// A Podman container (cgroup `libpod-<id>.scope`).
    Podman,
    /// A Kubernetes pod (cgroup under `kubepods`; named from the kubelet's `/var/log/pods`).
    Kubernetes,
    /// A containerd/CRI container outside Kubernetes (`cri-containerd-<id>.scope`).
    Containerd,
    /// A systemd-nspawn / machined machine (`machine.slice/machine-<name>.scope`).
    Nspawn,
    /// An LXC container (`/lxc.payload.<name>` or `/lxc/<name>`).
    Lxc,
    /// A namespace nothing names; shown by its inode.
    Unnamed,
}

impl std::fmt::Display for ZoneKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl ZoneKind {
    /// The name used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            ZoneKind::Global => "global",
            ZoneKind::Netns => "netns",
            ZoneKind::Docker => "docker",
            ZoneKind::Podman => "podman",
            ZoneKind::Kubernetes => "kubernetes",
            ZoneKind::Containerd => "containerd",
            ZoneKind::Nspawn => "nspawn",
            ZoneKind::Lxc => "lxc",
            ZoneKind::Unnamed => "unnamed",
        }
    }
}

/// One zone, as shown in the ZONE column and the `"zone"` JSON object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[non_exhaustive]
pub struct Zone {
    /// Display name: `global`, an `ip netns` name, a container or pod name, or the inode.
    pub name: String,
    /// What it is.
    pub kind: ZoneKind,
    /// The network namespace inode (`net:[N]`); `None` when it could not be read with these
    /// privileges (the zone was found through a process's `/proc/PID/net`).
    pub netns_inode: Option<u64>,
    /// Container id, when a container runtime owns it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// The runtime (`docker`, `podman`, `containerd`, `cri-o`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<&'static str>,
    /// Kubernetes pod `namespace/name`, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
}

impl Zone {
    /// A zone of this name and kind, with nothing else known (no inode, container or pod).
    pub fn new(name: impl Into<String>, kind: ZoneKind) -> Zone {
        Zone {
            name: name.into(),
            kind,
            netns_inode: None,
            container_id: None,
            runtime: None,
            pod: None,
        }
    }

    /// Whether `spec` (from `-z`) selects this zone: its name, a prefix of its container id
    /// (at least 4 characters), or its inode.
    pub fn matches(&self, spec: &str) -> bool {
        if self.name == spec {
            return true;
        }
        if let (Some(ino), Ok(n)) = (self.netns_inode, spec.parse::<u64>()) {
            if ino == n {
                return true;
            }
        }
        if let Some(id) = &self.container_id {
            if spec.len() >= 4 && id.starts_with(spec) {
                return true;
            }
        }
        if let Some(pod) = &self.pod {
            if pod == spec || pod.rsplit('/').next() == Some(spec) {
                return true;
            }
        }
        false
    }
}

/// A container found in a cgroup path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupContainer {
    /// Kind of zone it makes.
    pub kind: ZoneKind,
    /// Container id (hex) when the path carries one.
    pub id: Option<String>,
    /// A name when the path carries one (nspawn, LXC).
    pub name: Option<String>,
    /// Kubernetes pod uid (with `-`), when the path is under kubepods.
    pub pod_uid: Option<String>,
    /// The runtime.
    pub runtime: Option<&'static str>,
}

fn is_hex_id(s: &str) -> bool {
    s.len() >= 12 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Recognizes a container in a cgroup path (one line's path of `/proc/PID/cgroup`).
///
/// Layouts, from the runtimes' own code and docs:
/// - Docker, systemd driver: `/system.slice/docker-<64 hex>.scope`; cgroupfs driver:
///   `/docker/<64 hex>` (moby `daemon/oci_linux.go`, cgroup parent "docker").
/// - Podman: `/machine.slice/libpod-<64 hex>.scope` (rootful), `.../user.slice/.../libpod-<id>.scope`
///   (rootless); conmon lives in `libpod-conmon-<id>.scope` and is not the container.
/// - Kubernetes (kubelet cgroup manager): systemd driver
///   `/kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid with _>.slice/<runtime>-<id>.scope`
///   with runtime `cri-containerd`, `crio` or `docker`; cgroupfs driver
///   `/kubepods/<qos>/pod<uid>/<id>` (kubelet `pkg/kubelet/cm/cgroup_manager_linux.go`).
/// - containerd without Kubernetes: `/system.slice/cri-containerd-<id>.scope` or
///   `/<namespace>/<id>` under a containerd slice.
/// - systemd-nspawn / machined: `/machine.slice/machine-<name>.scope` or
///   `/machine.slice/systemd-nspawn@<name>.service` (systemd `machine-id` docs).
/// - LXC 4+: `/lxc.payload.<name>`; older: `/lxc/<name>`.
pub fn container_from_cgroup(path: &str) -> Option<CgroupContainer> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    // Kubernetes first: its leaf may look like a docker or containerd scope.
    if let Some(pos) = parts.iter().position(|p| p.starts_with("kubepods")) {
        let mut pod_uid = None;
        let mut id = None;
        let mut runtime = None;
        for p in &parts[pos..] {
            if let Some(rest) = p.strip_suffix(".slice") {
                if let Some(i) = rest.find("-pod") {
                    pod_uid = Some(rest[i + 4..].replace('_', "-"));
                }
            } else if let Some(uid) = p.strip_prefix("pod") {
                pod_uid = Some(uid.to_string());
            } else if let Some(scope) = p.strip_suffix(".scope") {
                for (prefix, rt) in [
                    ("cri-containerd-", "containerd"),
                    ("crio-", "cri-o"),
                    ("docker-", "docker"),
                ] {
                    if let Some(x) = scope.strip_prefix(prefix) {
                        id = Some(x.to_string());
                        runtime = Some(rt);
                    }
                }
            } else if is_hex_id(p) {
                id = Some(p.to_string());
            }
        }
        if pod_uid.is_some() {
            return Some(CgroupContainer {
                kind: ZoneKind::Kubernetes,
                id,
                name: None,
                pod_uid,
                runtime,
            });
        }
    }
    for (i, p) in parts.iter().enumerate() {
        if let Some(scope) = p.strip_suffix(".scope") {
            if let Some(id) = scope.strip_prefix("docker-").filter(|x| is_hex_id(x)) {
                return Some(container(ZoneKind::Docker, Some(id), None, "docker"));
            }
            if scope.starts_with("libpod-conmon-") {
                continue;
            }
            if let Some(id) = scope.strip_prefix("libpod-").filter(|x| is_hex_id(x)) {
                return Some(container(ZoneKind::Podman, Some(id), None, "podman"));
            }
            if let Some(id) = scope
                .strip_prefix("cri-containerd-")
                .filter(|x| is_hex_id(x))
            {
                return Some(container(
                    ZoneKind::Containerd,
                    Some(id),
                    None,
                    "containerd",
                ));
            }
            if let Some(name) = scope.strip_prefix("machine-") {
                return Some(container(
                    ZoneKind::Nspawn,
                    None,
                    Some(&unescape_systemd(name)),
                    "systemd-nspawn",
                ));
            }
        }
        if let Some(name) = p
            .strip_prefix("systemd-nspawn@")
            .and_then(|x| x.strip_suffix(".service"))
        {
            return Some(container(
                ZoneKind::Nspawn,
                None,
                Some(&unescape_systemd(name)),
                "systemd-nspawn",
            ));
        }
        if *p == "docker" {
            if let Some(id) = parts.get(i + 1).filter(|x| is_hex_id(x)) {
                return Some(container(ZoneKind::Docker, Some(id), None, "docker"));
            }
        }
        if let Some(name) = p.strip_prefix("lxc.payload.") {
            return Some(container(ZoneKind::Lxc, None, Some(name), "lxc"));
        }
        if *p == "lxc" {
            if let Some(name) = parts.get(i + 1) {
                return Some(container(ZoneKind::Lxc, None, Some(*name), "lxc"));
            }
        }
    }
    None
}

fn container(
    kind: ZoneKind,
    id: Option<&str>,
    name: Option<&str>,
    rt: &'static str,
) -> CgroupContainer {
    CgroupContainer {
        kind,
        id: id.map(str::to_string),
        name: name.map(str::to_string),
        pod_uid: None,
        runtime: Some(rt),
    }
}

/// systemd unit-name escaping: `\x2d` stands for the byte 0x2d, `-`. Works on bytes (an escape
/// may stand for one byte of a UTF-8 character, and a name may hold other characters as they
/// are), then reads the result as UTF-8, invalid bytes replaced.
fn unescape_systemd(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if let (b'\\', Some(b'x'), Some(&hi), Some(&lo)) =
            (b[i], b.get(i + 1).copied(), b.get(i + 2), b.get(i + 3))
        {
            if let (Some(h), Some(l)) = (hex(hi), hex(lo)) {
                out.push((h * 16 + l) as u8);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The container name in Docker's `config.v2.json` (`"Name":"/web-1"`), without the slash.
pub fn docker_name(config_v2_json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(config_v2_json).ok()?;
    let n = v.get("Name")?.as_str()?;
    Some(n.trim_start_matches('/').to_string()).filter(|n| !n.is_empty())
}

/// The names of a container in containers/storage's `containers.json` (Podman, CRI-O).
pub fn storage_name(containers_json: &str, id: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(containers_json).ok()?;
    v.as_array()?
        .iter()
        .find(|c| c.get("id").and_then(|x| x.as_str()) == Some(id))?
        .get("names")?
        .as_array()?
        .first()?
        .as_str()
        .map(str::to_string)
}

/// The pod `namespace/name` for a pod uid, from the kubelet's log directory names
/// (`/var/log/pods/<namespace>_<name>_<uid>`).
pub fn pod_from_log_dirs<'a>(dirs: impl IntoIterator<Item = &'a str>, uid: &str) -> Option<String> {
    dirs.into_iter().find_map(|d| {
        let rest = d.strip_suffix(uid)?.strip_suffix('_')?;
        let (ns, name) = rest.split_once('_')?;
        Some(format!("{ns}/{name}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f4e1a2b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f";

    /// Found by the `proc_files` fuzz target: an escape whose two hex digits were cut by a
    /// multi-byte character (`machine-web\xd\u{ff}.scope`) sliced the string inside the
    /// character and panicked, which any user who may name a cgroup could make happen to
    /// `sockstat -Z` run as root. Non-ASCII names were also garbled (`café` became `cafÃ©`).
    #[test]
    fn a_systemd_escape_cut_inside_a_character_is_kept_not_a_panic() {
        let name = |path: &str| container_from_cgroup(path).and_then(|c| c.name);
        assert_eq!(
            name("/machine.slice/machine-web\\xd\u{ff}.scope").as_deref(),
            Some("web\\xd\u{ff}")
        );
        assert_eq!(
            name("/machine.slice/machine-caf\u{e9}.scope").as_deref(),
            Some("caf\u{e9}")
        );
        // An escaped UTF-8 character, byte by byte, as systemd writes one.
        assert_eq!(
            name("/machine.slice/machine-caf\\xc3\\xa9\\x2d1.scope").as_deref(),
            Some("caf\u{e9}-1")
        );
        assert_eq!(
            name("/machine.slice/machine-x\\x.scope").as_deref(),
            Some("x\\x")
        );
        assert_eq!(
            name("/machine.slice/machine-\\xff.scope").as_deref(),
            Some("\u{fffd}")
        );
    }

    #[test]
    fn docker_both_drivers() {
        let c = container_from_cgroup(&format!("/system.slice/docker-{ID}.scope")).unwrap();
        assert_eq!((c.kind, c.id.as_deref()), (ZoneKind::Docker, Some(ID)));
        let c = container_from_cgroup(&format!("/docker/{ID}")).unwrap();
        assert_eq!((c.kind, c.id.as_deref()), (ZoneKind::Docker, Some(ID)));
    }

    #[test]
    fn podman_not_conmon() {
        assert!(
            container_from_cgroup(&format!("/machine.slice/libpod-conmon-{ID}.scope")).is_none()
        );
        let c =
            container_from_cgroup(&format!("/machine.slice/libpod-{ID}.scope/container")).unwrap();
        assert_eq!((c.kind, c.id.as_deref()), (ZoneKind::Podman, Some(ID)));
    }

    #[test]
    fn kubernetes_systemd_and_cgroupfs() {
        let p = format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a2b3c4d_0000_1111_2222_333344445555.slice/cri-containerd-{ID}.scope"
        );
        let c = container_from_cgroup(&p).unwrap();
        assert_eq!(c.kind, ZoneKind::Kubernetes);
        assert_eq!(
            c.pod_uid.as_deref(),
            Some("1a2b3c4d-0000-1111-2222-333344445555")
        );
        assert_eq!((c.id.as_deref(), c.runtime), (Some(ID), Some("containerd")));
        let c = container_from_cgroup(&format!("/kubepods/burstable/podabc-def/{ID}")).unwrap();
        assert_eq!(
            (c.kind, c.pod_uid.as_deref()),
            (ZoneKind::Kubernetes, Some("abc-def"))
        );
    }

    #[test]
    fn nspawn_and_lxc() {
        let c = container_from_cgroup("/machine.slice/machine-web\\x2d1.scope/payload").unwrap();
        assert_eq!(
            (c.kind, c.name.as_deref()),
            (ZoneKind::Nspawn, Some("web-1"))
        );
        let c = container_from_cgroup("/machine.slice/systemd-nspawn@db.service").unwrap();
        assert_eq!(c.name.as_deref(), Some("db"));
        let c = container_from_cgroup("/lxc.payload.c1/init.scope").unwrap();
        assert_eq!((c.kind, c.name.as_deref()), (ZoneKind::Lxc, Some("c1")));
        assert!(container_from_cgroup("/user.slice/user-0.slice/session-1.scope").is_none());
        assert!(container_from_cgroup("/").is_none());
    }

    #[test]
    fn cgroup_file_v2_first() {
        let t = "12:memory:/docker/abc\n0::/system.slice/x.service\n";
        assert_eq!(
            sockstat_wire::cgroup::paths(t),
            vec!["/system.slice/x.service", "/docker/abc"]
        );
    }

    #[test]
    fn runtime_metadata() {
        assert_eq!(
            docker_name(r#"{"Name":"/web-1","ID":"x"}"#).as_deref(),
            Some("web-1")
        );
        let j = format!(r#"[{{"id":"{ID}","names":["api"]}}]"#);
        assert_eq!(storage_name(&j, ID).as_deref(), Some("api"));
        assert_eq!(
            pod_from_log_dirs(["kube-system_coredns-5d78_1a-2b", "default_web_9-9"], "9-9")
                .as_deref(),
            Some("default/web")
        );
    }

    #[test]
    fn zone_selection() {
        let z = Zone {
            name: "web-1".into(),
            kind: ZoneKind::Docker,
            netns_inode: Some(4026532248),
            container_id: Some(ID.into()),
            runtime: Some("docker"),
            pod: None,
        };
        assert!(z.matches("web-1") && z.matches("3f4e1a") && z.matches("4026532248"));
        assert!(!z.matches("3f4") && !z.matches("web") && !z.matches("1"));
    }
}
