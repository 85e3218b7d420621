//! Zones (`-Z`, `-z`, `-j`): network namespaces made by the test, each with a process holding a
//! listener on the same port as the host, so only the zone tells them apart. Container runtimes
//! are imitated for real: a namespace the test made is bind-mounted where the runtime keeps its
//! namespaces, and the holder process is moved into a cgroup2 directory laid out as that runtime
//! lays it out, so discovery, naming and `setns` all run against the kernel.
//!
//! The holders are this test binary itself, re-run with `ZONE_HOLDER=<port>` (see
//! `zone_holder_child`): it listens on 127.0.0.1:<port>, prints `READY`, and exits when its stdin
//! closes or the test process dies.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

const SOCKSTAT: &str = env!("CARGO_BIN_EXE_sockstat");

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

macro_rules! require_root {
    () => {
        if !is_root() {
            eprintln!(
                "SKIPPED: {} needs root (network namespaces, cgroups)",
                module_path!()
            );
            return;
        }
    };
}

/// When run as a holder: listen, say READY, wait for stdin to close.
#[test]
fn zone_holder_child() {
    let Ok(port) = std::env::var("ZONE_HOLDER") else {
        return;
    };
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a signal for this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let l = TcpListener::bind(format!("127.0.0.1:{port}")).expect("holder bind");
    println!("READY {}", std::process::id());
    std::io::stdout().flush().unwrap();
    let mut s = String::new();
    let _ = std::io::stdin().read_line(&mut s);
    drop(l);
    std::process::exit(0);
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

fn unique(tag: &str) -> String {
    format!(
        "sst-{tag}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    )
}

fn sh(cmd: &[&str]) -> bool {
    Command::new(cmd[0])
        .args(&cmd[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// A network namespace made with `ip netns add`, removed on drop.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = unique(tag);
        assert!(sh(&["ip", "netns", "add", &name]), "ip netns add {name}");
        assert!(sh(&["ip", "-n", &name, "link", "set", "lo", "up"]));
        Netns(name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        sh(&["ip", "netns", "del", &self.0]);
    }
}

/// A holder process (this binary), killed on drop.
struct Holder {
    child: Child,
    pid: u32,
}

impl Holder {
    fn start(netns: Option<&str>, port: u16) -> Holder {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        cmd.args([
            "--exact",
            &crate::common::test_path(module_path!(), "zone_holder_child"),
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("ZONE_HOLDER", port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("spawn holder");
        let out = child.stdout.take().unwrap();
        let mut pid = 0;
        for line in BufReader::new(out).lines() {
            let line = line.unwrap();
            // libtest prints "test zone_holder_child ... " on the same line first.
            if let Some((_, p)) = line.split_once("READY ") {
                pid = p.trim().parse().unwrap();
                break;
            }
        }
        assert!(pid > 0, "holder did not start");
        Holder { child, pid }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn sockstat(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(SOCKSTAT).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = sockstat(args);
    assert_eq!(code, 0, "sockstat {args:?} failed: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    crate::common::validate(&v);
    v
}

/// (zone name, zone kind, owner pids) of every socket listening on `port`.
fn zones_on_port(v: &serde_json::Value) -> Vec<(String, String, Vec<u64>)> {
    v["sockets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["zone"]["name"].as_str().unwrap_or("").to_string(),
                s["zone"]["kind"].as_str().unwrap_or("").to_string(),
                s["owners"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| o["pid"].as_u64().unwrap())
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn every_zone_is_listed_with_its_name_and_owner() {
    require_root!();
    let port = free_port();
    let (a, b) = (Netns::new("za"), Netns::new("zb"));
    let host = Holder::start(None, port);
    let ha = Holder::start(Some(&a.0), port);
    let hb = Holder::start(Some(&b.0), port);
    let p = port.to_string();
    let v = json(&["-Z", "-l", "-4", "-p", &p, "--json"]);
    let got = zones_on_port(&v);
    let find = |name: &str| got.iter().find(|(n, _, _)| n == name).cloned();
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(find("global").unwrap().2, vec![u64::from(host.pid)]);
    assert_eq!(
        find(&a.0).unwrap(),
        (a.0.clone(), "netns".into(), vec![u64::from(ha.pid)])
    );
    assert_eq!(
        find(&b.0).unwrap(),
        (b.0.clone(), "netns".into(), vec![u64::from(hb.pid)])
    );
    // Global first, then by name.
    assert_eq!(got[0].0, "global");

    // The table puts ZONE first.
    let (code, out, _) = sockstat(&["-Z", "-l", "-4", "-p", &p]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("ZONE "), "{out}");
    let row = lines
        .iter()
        .find(|l| l.starts_with(&a.0))
        .expect("zone row");
    assert!(
        row.contains(&format!(" {} ", ha.pid)) && row.contains(&format!("127.0.0.1:{port}")),
        "{row}"
    );
}

#[test]
fn one_zone_by_name_inode_or_j() {
    require_root!();
    let port = free_port();
    let a = Netns::new("zsel");
    let _host = Holder::start(None, port);
    let ha = Holder::start(Some(&a.0), port);
    let p = port.to_string();
    for sel in ["-z", "-j"] {
        let v = json(&[sel, &a.0, "-l", "-p", &p, "--json"]);
        let got = zones_on_port(&v);
        assert_eq!(
            got,
            vec![(a.0.clone(), "netns".into(), vec![u64::from(ha.pid)])],
            "{sel}"
        );
    }
    let inode = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(format!("/run/netns/{}", a.0))
            .unwrap()
            .ino()
    };
    let v = json(&["-z", &inode.to_string(), "-l", "-p", &p, "--json"]);
    assert_eq!(zones_on_port(&v).len(), 1);
    assert_eq!(v["sockets"][0]["zone"]["netns_inode"], inode);
}

#[test]
fn unknown_zone_is_exit_2_naming_it() {
    // Needs no root: discovery finds at least the global zone.
    let (code, out, err) = sockstat(&["-z", "no-such-zone-xyz"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("sockstat: unknown zone 'no-such-zone-xyz': give a zone name, container id prefix or namespace inode (known: global"),
        "{err}"
    );
}

#[test]
fn unprivileged_run_falls_back_to_proc_net_with_a_warning() {
    require_root!();
    let port = free_port();
    let a = Netns::new("zunpriv");
    let ha = Holder::start(Some(&a.0), port);
    let p = port.to_string();
    let o = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            SOCKSTAT,
        ])
        .args(["-Z", "-l", "-4", "-p", &p, "--json"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // The namespace's listener is still listed (from /proc/<pid>/net), named by its process.
    let socks = v["sockets"].as_array().unwrap();
    let s = socks
        .iter()
        .find(|s| s["zone"]["name"] == format!("pid:{}", ha.pid))
        .unwrap_or_else(|| panic!("no zone for pid {} in {v}", ha.pid));
    assert_eq!(s["local"]["port"], port);
    assert_eq!(s["cookie"], serde_json::Value::Null, "read from /proc text");
    assert_eq!(s["owners_status"], "hidden");
    let codes: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"zones-not-joined"), "{codes:?}");
    assert!(codes.contains(&"zones-partial"), "{codes:?}");
}

/// Run as nobody with CAP_SYS_ADMIN only, sockstat may join namespaces but not read root's
/// namespace links: a namespace that `ip netns` mounted and a root process lives in is found
/// both by its mount and through the process's /proc/PID/net. It is one zone, listed once under
/// its name and read from inside (socket cookies present), not a second time as `pid:N`.
#[test]
fn with_cap_sys_admin_alone_a_mounted_namespace_is_listed_once_by_name() {
    require_root!();
    let port = free_port();
    let a = Netns::new("zadmin");
    let ha = Holder::start(Some(&a.0), port);
    let p = port.to_string();
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all,+sys_admin",
            "--ambient-caps=-all,+sys_admin",
            SOCKSTAT,
        ])
        .args(["-Z", "-l", "-4", "-p", &p, "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ours: Vec<&serde_json::Value> = v["sockets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["zone"]["name"] == a.0.as_str() || s["zone"]["name"] == format!("pid:{}", ha.pid)
        })
        .collect();
    assert_eq!(ours.len(), 1, "listed once: {ours:#?}\n{err}");
    assert_eq!(ours[0]["zone"]["name"], a.0.as_str(), "{ours:#?}");
    assert_eq!(ours[0]["zone"]["kind"], "netns");
    assert!(
        !ours[0]["cookie"].is_null(),
        "joined, not read from /proc text: {ours:#?}"
    );
}

/// A runtime's footprint, made real: the namespace bind-mounted where the runtime keeps it (if
/// it keeps it anywhere), the holder moved into the runtime's cgroup path on the cgroup2
/// hierarchy, and the runtime's metadata file. All removed on drop.
struct Runtime {
    holder: Holder,
    cgroup: PathBuf,
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
    mount: Option<PathBuf>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // The cgroup can only be removed once its process is gone.
        let _ = self.holder.child.kill();
        let _ = self.holder.child.wait();
        if let Some(m) = &self.mount {
            sh(&["umount", &m.to_string_lossy()]);
            let _ = std::fs::remove_file(m);
        }
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        for d in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
        let mut p = self.cgroup.clone();
        while p.starts_with(cgroup2_root().unwrap_or_default())
            && p != cgroup2_root().unwrap_or_default()
        {
            if std::fs::remove_dir(&p).is_err() {
                break;
            }
            p.pop();
        }
    }
}

/// Where the cgroup2 hierarchy is mounted (`/sys/fs/cgroup` on unified hosts,
/// `/sys/fs/cgroup/unified` on hybrid ones like this VM).
fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
    })
}

fn move_into_cgroup(rel: &str, pid: u32) -> PathBuf {
    let dir = cgroup2_root()
        .expect("a cgroup2 hierarchy")
        .join(rel.trim_start_matches('/'));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cgroup.procs"), pid.to_string()).unwrap();
    dir
}

fn write_file(path: &Path, text: &str, rt: &mut Runtime) {
    let mut missing = Vec::new();
    let mut p = path.parent().unwrap().to_path_buf();
    while !p.exists() {
        missing.push(p.clone());
        p.pop();
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    rt.dirs.extend(missing.into_iter().rev());
    std::fs::write(path, text).unwrap();
    rt.files.push(path.to_path_buf());
}

fn hex_id(seed: u32) -> String {
    format!("{:08x}", seed).repeat(8)
}

/// Each runtime's layout, and the zone name and kind sockstat must derive from it.
#[test]
fn container_runtimes_name_their_zones() {
    require_root!();
    if cgroup2_root().is_none() {
        eprintln!("SKIPPED: no cgroup2 hierarchy mounted");
        return;
    }
    let port = free_port();
    let p = port.to_string();
    let seed = std::process::id();

    // Docker, systemd cgroup driver: /system.slice/docker-<id>.scope (moby
    // daemon/oci_linux.go); namespace under /run/docker/netns/<sandbox>; the name from
    // /var/lib/docker/containers/<id>/config.v2.json.
    {
        let ns = Netns::new("zdock");
        let id = hex_id(seed);
        let h = Holder::start(Some(&ns.0), port);
        let pid = h.pid;
        let mut rt = Runtime {
            cgroup: move_into_cgroup(&format!("/system.slice/docker-{id}.scope"), pid),
            holder: h,
            files: vec![],
            dirs: vec![],
            mount: None,
        };
        let sandbox = PathBuf::from(format!("/run/docker/netns/{}", &id[..12]));
        if !Path::new("/run/docker/netns").exists() {
            std::fs::create_dir_all("/run/docker/netns").unwrap();
            rt.dirs.push(PathBuf::from("/run/docker"));
            rt.dirs.push(PathBuf::from("/run/docker/netns"));
        }
        std::fs::write(&sandbox, "").unwrap();
        assert!(sh(&[
            "mount",
            "--bind",
            &format!("/run/netns/{}", ns.0),
            &sandbox.to_string_lossy()
        ]));
        rt.mount = Some(sandbox);
        write_file(
            &PathBuf::from(format!("/var/lib/docker/containers/{id}/config.v2.json")),
            &format!(r#"{{"ID":"{id}","Name":"/web-{seed}"}}"#),
            &mut rt,
        );
        let v = json(&["-z", &format!("web-{seed}"), "-l", "-p", &p, "--json"]);
        let z = &v["sockets"][0]["zone"];
        assert_eq!(z["kind"], "docker", "{v}");
        assert_eq!(z["container_id"], id.as_str());
        assert_eq!(z["runtime"], "docker");
        assert_eq!(v["sockets"][0]["owners"][0]["pid"], pid);
        // By id prefix too.
        assert_eq!(
            json(&["-z", &id[..12], "-l", "-p", &p, "--json"])["sockets"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        drop(rt);
    }

    // Kubernetes with containerd, systemd driver: kubepods.slice/kubepods-besteffort.slice/
    // kubepods-besteffort-pod<uid with _>.slice/cri-containerd-<id>.scope (kubelet
    // pkg/kubelet/cm/cgroup_manager_linux.go); the pod name from the kubelet's
    // /var/log/pods/<namespace>_<name>_<uid>.
    {
        let ns = Netns::new("zk8s");
        let id = hex_id(seed ^ 0x5a5a);
        let uid = format!("{:08x}-1111-2222-3333-444455556666", seed);
        let h = Holder::start(Some(&ns.0), port);
        let pid = h.pid;
        let mut rt = Runtime {
            cgroup: move_into_cgroup(
                &format!(
                    "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/cri-containerd-{id}.scope",
                    uid.replace('-', "_")
                ),
                pid,
            ),
            holder: h,
            files: vec![],
            dirs: vec![],
            mount: None,
        };
        let logdir = PathBuf::from(format!("/var/log/pods/shop_cart-{seed}_{uid}"));
        write_file(&logdir.join("keep"), "", &mut rt);
        rt.dirs.push(logdir);
        let v = json(&["-z", &format!("shop/cart-{seed}"), "-l", "-p", &p, "--json"]);
        let z = &v["sockets"][0]["zone"];
        assert_eq!(z["kind"], "kubernetes", "{v}");
        assert_eq!(z["pod"], format!("shop/cart-{seed}"));
        assert_eq!(z["runtime"], "containerd");
        assert_eq!(v["sockets"][0]["owners"][0]["pid"], pid);
        drop(rt);
    }

    // Podman, rootful with netavark: the namespace at /run/netns/netns-<uuid>, the container in
    // /machine.slice/libpod-<id>.scope (podman docs, "cgroup_manager = systemd"), its name in
    // containers/storage's overlay-containers/containers.json. Only when that file does not exist
    // already: a real Podman's file is never touched.
    let storage = PathBuf::from("/var/lib/containers/storage/overlay-containers/containers.json");
    if storage.exists() {
        eprintln!(
            "SKIPPED (podman layout): {} exists on this host",
            storage.display()
        );
    } else {
        let id = hex_id(seed ^ 0x77);
        let uuid = format!("{:08x}-aaaa-bbbb-cccc-{:012x}", seed, seed);
        let nsname = format!("netns-{uuid}");
        assert!(sh(&["ip", "netns", "add", &nsname]));
        let ns = Netns(nsname);
        sh(&["ip", "-n", &ns.0, "link", "set", "lo", "up"]);
        let h = Holder::start(Some(&ns.0), port);
        let pid = h.pid;
        let mut rt = Runtime {
            cgroup: move_into_cgroup(&format!("/machine.slice/libpod-{id}.scope"), pid),
            holder: h,
            files: vec![],
            dirs: vec![],
            mount: None,
        };
        write_file(
            &storage,
            &format!(r#"[{{"id":"{id}","names":["api-{seed}"]}}]"#),
            &mut rt,
        );
        let v = json(&["-z", &format!("api-{seed}"), "-l", "-p", &p, "--json"]);
        let z = &v["sockets"][0]["zone"];
        assert_eq!(z["kind"], "podman", "{v}");
        assert_eq!(z["container_id"], id.as_str());
        assert_eq!(v["sockets"][0]["owners"][0]["pid"], pid);
        drop(rt);
    }

    // systemd-nspawn / machined: /machine.slice/machine-<name>.scope (systemd.special(7),
    // machine-<name>.scope units created by machined).
    {
        let ns = Netns::new("zmach");
        let h = Holder::start(Some(&ns.0), port);
        let pid = h.pid;
        let rt = Runtime {
            cgroup: move_into_cgroup(&format!("/machine.slice/machine-box{seed}.scope"), pid),
            holder: h,
            files: vec![],
            dirs: vec![],
            mount: None,
        };
        let v = json(&["-z", &format!("box{seed}"), "-l", "-p", &p, "--json"]);
        assert_eq!(v["sockets"][0]["zone"]["kind"], "nspawn", "{v}");
        drop(rt);
    }

    // LXC 4+: /lxc.payload.<name> (lxc src/lxc/cgroups/cgfsng.c, "lxc.payload").
    {
        let ns = Netns::new("zlxc");
        let h = Holder::start(Some(&ns.0), port);
        let pid = h.pid;
        let rt = Runtime {
            cgroup: move_into_cgroup(&format!("/lxc.payload.c{seed}"), pid),
            holder: h,
            files: vec![],
            dirs: vec![],
            mount: None,
        };
        let v = json(&["-z", &format!("c{seed}"), "-l", "-p", &p, "--json"]);
        assert_eq!(v["sockets"][0]["zone"]["kind"], "lxc", "{v}");
        drop(rt);
    }
}

/// `--cgroup` names the cgroup a socket was created in, from the kernel's socket cgroup id,
/// with no /proc scan: the test mounts a cgroup2 hierarchy of its own, makes a cgroup, and starts
/// the holder inside it (the socket's cgroup is captured when the socket is created).
#[test]
fn cgroup_column_names_the_socket_cgroup() {
    require_root!();
    let mnt = std::env::temp_dir().join(unique("cg2"));
    std::fs::create_dir_all(&mnt).unwrap();
    if !sh(&["mount", "-t", "cgroup2", "none", &mnt.to_string_lossy()]) {
        let _ = std::fs::remove_dir(&mnt);
        eprintln!("SKIPPED: cannot mount a cgroup2 hierarchy here");
        return;
    }
    struct Cleanup(PathBuf, PathBuf, Option<Holder>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            drop(self.2.take());
            let _ = std::fs::remove_dir(&self.1);
            sh(&["umount", &self.0.to_string_lossy()]);
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    let name = unique("svc");
    let cg = mnt.join(format!("{name}.service"));
    std::fs::create_dir(&cg).unwrap();
    let mut guard = Cleanup(mnt.clone(), cg.clone(), None);
    let port = free_port();
    // The holder moves itself into the cgroup before it creates its socket.
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > '{}/cgroup.procs' && exec \"$0\" \"$@\"",
            cg.display()
        ))
        .arg(&exe)
        .args([
            "--exact",
            &crate::common::test_path(module_path!(), "zone_holder_child"),
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("ZONE_HOLDER", port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut pid = 0;
    for line in BufReader::new(out).lines() {
        if let Some((_, p)) = line.unwrap().split_once("READY ") {
            pid = p.trim().parse().unwrap();
            break;
        }
    }
    assert!(pid > 0, "holder did not start");
    guard.2 = Some(Holder { child, pid });
    let inode = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&cg).unwrap().ino()
    };
    let p = port.to_string();
    let v = json(&["--cgroup", "--no-owners", "-l", "-4", "-p", &p, "--json"]);
    let s = &v["sockets"][0];
    assert_eq!(s["cgroup"]["id"], inode, "{v}");
    assert_eq!(s["cgroup"]["path"], format!("/{name}.service"), "{v}");
    assert_eq!(s["owners_status"], "not_requested");
    let (code, out, _) = sockstat(&["--cgroup", "--no-owners", "-l", "-4", "-p", &p]);
    assert_eq!(code, 0);
    assert!(out.lines().next().unwrap().contains("CGROUP"), "{out}");
    assert!(out.contains(&format!("/{name}.service")), "{out}");
    // Unprivileged too: the cgroup id comes with every socket, for any user.
    let o = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            SOCKSTAT,
        ])
        .args(["--cgroup", "--no-owners", "-l", "-4", "-p", &p, "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["sockets"][0]["cgroup"]["path"],
        format!("/{name}.service"),
        "{v}"
    );
}
