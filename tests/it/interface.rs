//! Issue 28: no option is offered that is then refused. For the listing and every subcommand,
//! each option its `--help` lists (which equals what the man page and the completions list:
//! the binary's `generate::tests`) is given to the real command, with a value where it takes
//! one, and the command must not refuse it: it runs (status 0 or 1), or stops for a reason
//! other than usage (3 without privileges, 4 when, by design of the case, there is nothing to
//! do), never status 2. Each case is made to end quickly.

use std::net::{Ipv4Addr, TcpListener};

use crate::common::*;

/// The options a `--help` lists: each name (`-z`, `-j`, `--watch`) with the value name it
/// takes, if any.
fn listed(help: &str) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for line in help.lines() {
        let head = if line.starts_with("  -") || line.starts_with("      --") {
            line.trim_start()
        } else if let Some(a) = line
            .trim()
            .strip_prefix("[alias: ")
            .or_else(|| line.trim().strip_prefix("[aliases: "))
        {
            // The aliases of the option above take its value.
            let value = out.last().and_then(|o| o.1.clone());
            for name in a.trim_end_matches(']').split(", ") {
                out.push((name.to_string(), value.clone()));
            }
            continue;
        } else {
            continue;
        };
        // "-z <ZONE>", "-T, --tcp-info", "--watch [<SECONDS>]", then the help, two spaces on.
        let head = head.split("  ").next().unwrap();
        let (names, value) = match head.find(" <").or(head.find(" [<")) {
            Some(at) => {
                let v = head[at..].trim_start_matches([' ', '[']);
                let v = v
                    .strip_suffix(']')
                    .filter(|_| head[at..].starts_with(" ["))
                    .unwrap_or(v);
                (
                    &head[..at],
                    Some(v.trim_start_matches('<').trim_end_matches('>').to_string()),
                )
            }
            None => (head, None),
        };
        for n in names.split(", ") {
            out.push((n.to_string(), value.clone()));
        }
    }
    out
}

/// A value the option accepts, by its value name.
fn sample(value: &str, view: Option<&str>, dir: &std::path::Path, taken: &str) -> String {
    match value {
        "PORTS" => "80,8000-8100".into(),
        "ADDR[/LEN]" => "192.0.2.0/24".into(),
        "PROTOS" => "tcp".into(),
        "STATES" => "ESTABLISHED".into(),
        "PIDS" => "1".into(),
        "USER" => "0".into(),
        "NAME" => "nomatch".into(),
        "LISTENERS" => "5432".into(),
        "ZONE" => "global".into(),
        "WHEN" => "never".into(),
        "SOURCE" => "netlink".into(),
        "HOW" => "proc".into(),
        "SECONDS" => "0.05".into(),
        "N" => "1".into(),
        "RATE" => "100Mbit".into(),
        "ID" | "COOKIE" | "COOKIES" => "1".into(),
        // trace -o: a picture's name.
        "FILE" if view == Some("trace") => dir.join("x.svg").display().to_string(),
        "FILE" => {
            // serve --web.config.file: an empty configuration (plain HTTP).
            let f = dir.join("web.yml");
            std::fs::write(&f, "").unwrap();
            f.display().to_string()
        }
        "DURATION" => "5s".into(),
        "GROUPING" => "connection".into(),
        "COLUMN" => "send".into(),
        "ADDR:PORT" => taken.into(),
        other => panic!("no sample value for {other}: add one"),
    }
}

/// What each view is run with after the option under test, so that it ends at once: the
/// listing over one UDP port, the waits a twentieth of a second, kill a dry run of a cookie no
/// socket has, trace a cookie no connection has, serve a port that is taken.
fn base(view: Option<&str>, taken: &str) -> Vec<String> {
    let v: &[&str] = match view {
        None => &["-4", "-P", "udp", "-p", "1"],
        Some("counters") => &[],
        Some("diagnose") => &["--interval", "0.05", "-p", "1"],
        Some("ports") => &["-p", "1"],
        Some("drops") => &["0.05"],
        Some("events") => &["--duration", "0.05"],
        Some("kill") => &["--dry-run", "--cookie", "1"],
        Some("trace") => &["--json", "--duration", "0.05", "--cookie", "1"],
        Some("serve") => &["--listen", taken],
        Some("top") => &["--batch", "--count", "1", "--interval", "0.05", "-p", "1"],
        Some(other) => panic!("no base arguments for {other}: add them"),
    };
    v.iter().map(|s| s.to_string()).collect()
}

fn options_of(help: &str, name: &str) -> bool {
    listed(help).iter().any(|o| o.0 == name)
}

#[test]
fn every_option_listed_is_accepted_by_the_command() {
    let dir = tempdir();
    let taken_l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let taken = taken_l.local_addr().unwrap().to_string();
    let help = sockstat(&["--help"]).ok().stdout;
    let subs: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A name at two spaces; a description wrapped onto the next line is indented further.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|s| *s != "help")
        .map(str::to_string)
        .collect();
    assert!(subs.len() >= 8, "{subs:?}");
    let mut runs: Vec<Vec<String>> = Vec::new();
    for view in std::iter::once(None).chain(subs.iter().map(|s| Some(s.as_str()))) {
        let help = match view {
            None => help.clone(),
            Some(s) => sockstat(&[s, "--help"]).ok().stdout,
        };
        let options = listed(&help);
        assert!(
            options.iter().any(|o| o.0 == "--help"),
            "{view:?}: {options:?}"
        );
        for (name, value) in options {
            let mut args: Vec<String> = view.iter().map(|s| s.to_string()).collect();
            args.push(name.clone());
            if let Some(v) = &value {
                args.push(sample(v, view, dir.path(), &taken));
            }
            // The listing's watch modes, and ports', counters' and diagnose's, end after a
            // refresh.
            if matches!(name.as_str(), "--watch" | "--events") && options_of(&help, "--count") {
                args.extend(["--count".to_string(), "1".to_string()]);
            }
            args.extend(base(view, &taken));
            runs.push(args);
        }
    }
    // Three at a time: each is short, and most of it is starting up.
    let tried = runs.len();
    std::thread::scope(|scope| {
        for part in runs.chunks(tried.div_ceil(3)) {
            scope.spawn(move || {
                for args in part {
                    let out = sockstat(args).run().no_panic();
                    assert!(
                        !out.stderr.contains("does not apply")
                            && !out.stderr.contains("unexpected"),
                        "{args:?}: {}",
                        out.stderr
                    );
                    assert!(
                        matches!(out.code, Some(0 | 1 | 3 | 4)),
                        "{args:?}: status {:?}: {}",
                        out.code,
                        out.stderr
                    );
                }
            });
        }
    });
    assert!(tried > 150, "{tried} options tried");
    drop(taken_l);
}
