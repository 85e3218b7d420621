//! The web configuration file of the Prometheus exporter toolkit, the one node_exporter reads
//! with `--web.config.file`: `tls_server_config`, `http_server_config`, `basic_auth_users`,
//! `rate_limit`. The same file works here, so an operator reuses what they have; where sockstat
//! cannot do what a key asks, the file is refused with a message naming the key (or, when doing
//! less would still be safe, a note at start says what is different). doc/serve.md lists every
//! key.
//!
//! Loading is pure but for reading the files: the result is a [`WebConfig`] whose TLS part is a
//! finished rustls configuration, and the list of files it was built from (for reloads).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::tls;

/// The file as written (every key optional, unknown keys refused).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    tls_server_config: Option<TlsSection>,
    #[serde(default)]
    http_server_config: Option<HttpSection>,
    #[serde(default)]
    basic_auth_users: Option<BTreeMap<String, String>>,
    #[serde(default)]
    rate_limit: Option<RateLimitSection>,
}

/// `tls_server_config`, as the toolkit names its keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TlsSection {
    pub cert: Option<String>,
    pub key: Option<String>,
    pub client_ca: Option<String>,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub client_auth_type: Option<String>,
    pub client_ca_file: Option<String>,
    pub client_allowed_sans: Option<Vec<String>>,
    pub min_version: Option<String>,
    pub max_version: Option<String>,
    pub cipher_suites: Option<Vec<String>>,
    pub prefer_server_cipher_suites: Option<bool>,
    pub curve_preferences: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpSection {
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimitSection {
    interval: Option<String>,
    burst: Option<u32>,
}

/// A loaded, checked web configuration.
#[derive(Debug)]
pub struct WebConfig {
    /// The rustls server configuration, when `tls_server_config` sets anything.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Every client must present a certificate a configured CA signed
    /// (`RequireAndVerifyClientCert`).
    pub clients_verified: bool,
    /// User name → bcrypt hash; empty: no authentication.
    pub users: BTreeMap<String, String>,
    /// Extra response headers (`http_server_config.headers`).
    pub headers: Vec<(String, String)>,
    /// At most one request per `interval`, with bursts of `burst` (`rate_limit`).
    pub rate_limit: Option<RateLimit>,
    /// What the file asks that sockstat does differently, to print once at start.
    pub notes: Vec<String>,
    /// The files it was built from (the file itself first), for reloads.
    pub files: Vec<PathBuf>,
}

/// `rate_limit`: a token bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Time to earn one request.
    pub interval: Duration,
    /// Requests that may come at once.
    pub burst: u32,
}

/// The response headers the toolkit lets a file set, with the values it allows (empty: any).
const HEADERS: [(&str, &[&str]); 5] = [
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

/// A path from the file: relative ones are relative to the file's directory, as the toolkit
/// reads them.
fn resolve(dir: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

/// An unset key and an empty string mean the same in the toolkit's format.
pub(super) fn set(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.is_empty())
}

impl TlsSection {
    /// True when any key asks for TLS (the toolkit's rule: then cert and key are required).
    fn enabled(&self) -> bool {
        [
            &self.cert,
            &self.key,
            &self.client_ca,
            &self.cert_file,
            &self.key_file,
            &self.client_auth_type,
            &self.client_ca_file,
        ]
        .iter()
        .any(|v| set(v).is_some())
    }
}

/// Reads and checks the file at `path`. The error is one line naming the file and what is
/// wrong in it.
pub fn load(path: &Path) -> Result<WebConfig, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    load_text(path, &text).map_err(|e| format!("{shown}: {e}"))
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn load_text(path: &Path, text: &str) -> Result<WebConfig, String> {
    // An empty file (or one of comments only) is a valid configuration: plain HTTP, no users.
    let file: FileConfig = match serde_yaml_ng::from_str::<Option<FileConfig>>(text) {
        Ok(f) => f.unwrap_or_default(),
        Err(e) => return Err(one_line(&e.to_string())),
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut notes = Vec::new();
    let mut files = vec![path.to_path_buf()];

    let tls = match &file.tls_server_config {
        Some(t) if t.enabled() => {
            let cert_file = set(&t.cert_file).map(|p| resolve(dir, p));
            let key_file = set(&t.key_file).map(|p| resolve(dir, p));
            let ca_file = set(&t.client_ca_file).map(|p| resolve(dir, p));
            files.extend(
                [&cert_file, &key_file, &ca_file]
                    .into_iter()
                    .flatten()
                    .cloned(),
            );
            let built = tls::build(
                t,
                &tls::Files {
                    cert: cert_file.as_deref(),
                    key: key_file.as_deref(),
                    client_ca: ca_file.as_deref(),
                },
                &mut notes,
            )
            .map_err(|e| format!("tls_server_config: {e}"))?;
            Some(built)
        }
        _ => None,
    };

    let clients_verified = tls.is_some()
        && file
            .tls_server_config
            .as_ref()
            .and_then(|t| set(&t.client_auth_type))
            == Some("RequireAndVerifyClientCert");

    let users = file.basic_auth_users.unwrap_or_default();
    for (user, hash) in &users {
        if user.contains(':') {
            return Err(format!(
                "basic_auth_users: user name '{user}' contains ':', which basic authentication cannot carry"
            ));
        }
        hash.parse::<bcrypt::HashParts>().map_err(|e| {
            format!("basic_auth_users: the hash of user '{user}' is not a bcrypt hash ({e}); make one with htpasswd -nBC 10 \"\" | tr -d ':\\n'")
        })?;
    }
    if !users.is_empty() && tls.is_none() {
        notes.push(
            "basic_auth_users without tls_server_config: passwords cross the network in clear"
                .into(),
        );
    }

    let mut headers = Vec::new();
    if let Some(http) = &file.http_server_config {
        if http.http2 == Some(true) {
            notes.push("http_server_config.http2: sockstat speaks HTTP/1.1 only".into());
        }
        for (name, value) in http.headers.iter().flatten() {
            let Some((_, allowed)) = HEADERS.iter().find(|(h, _)| h == name) else {
                return Err(format!(
                    "http_server_config.headers: header '{name}' cannot be set (allowed: {})",
                    HEADERS.map(|(h, _)| h).join(", ")
                ));
            };
            if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
                return Err(format!(
                    "http_server_config.headers: {name} '{value}' is not one of {}",
                    allowed.join(", ")
                ));
            }
            if value.is_empty() {
                continue;
            }
            if value.bytes().any(|b| b.is_ascii_control()) {
                return Err(format!(
                    "http_server_config.headers: the value of {name} has a control character"
                ));
            }
            headers.push((name.clone(), value.clone()));
        }
    }

    let rate_limit = match &file.rate_limit {
        None => None,
        Some(r) => {
            let interval = match set(&r.interval) {
                None => Duration::ZERO,
                Some(s) => parse_go_duration(s).ok_or_else(|| {
                    format!("rate_limit.interval: '{s}' is not a duration like 1s, 100ms or 1m30s")
                })?,
            };
            if interval.is_zero() {
                None
            } else {
                let burst = r.burst.unwrap_or(0);
                if burst == 0 {
                    return Err(
                        "rate_limit.burst: give at least 1 (with 0 every request would be refused)"
                            .into(),
                    );
                }
                Some(RateLimit { interval, burst })
            }
        }
    };

    Ok(WebConfig {
        tls,
        clients_verified,
        users,
        headers,
        rate_limit,
        notes,
        files,
    })
}

/// A duration as Go writes it: a sequence of decimal numbers with units (`ns`, `us`, `µs`,
/// `ms`, `s`, `m`, `h`), like `1m30s` or `0.5s`; `0` alone is zero.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * unit;
    }
    (total.is_finite() && total < 1e9).then(|| Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(text: &str) -> Result<WebConfig, String> {
        load_text(Path::new("/nonexistent/web.yml"), text)
    }

    /// The toolkit's own example hash (from its handler, the password "fakepassword"), made by
    /// Go's bcrypt with the `$2y$` prefix htpasswd writes.
    const FAKEPASSWORD: &str = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";

    #[test]
    fn an_empty_file_is_plain_http_without_users() {
        for text in ["", "# nothing\n", "{}\n"] {
            let c = load_str(text).unwrap();
            assert!(c.tls.is_none() && c.users.is_empty() && c.rate_limit.is_none());
        }
    }

    #[test]
    fn users_need_bcrypt_hashes_and_htpasswd_hashes_verify() {
        let c = load_str(&format!("basic_auth_users:\n  prom: '{FAKEPASSWORD}'\n")).unwrap();
        assert_eq!(c.users.len(), 1);
        assert!(bcrypt::verify("fakepassword", &c.users["prom"]).unwrap());
        assert!(
            c.notes.iter().any(|n| n.contains("in clear")),
            "{:?}",
            c.notes
        );
        let e = load_str("basic_auth_users:\n  prom: secret\n").unwrap_err();
        assert!(
            e.contains("the hash of user 'prom' is not a bcrypt hash"),
            "{e}"
        );
    }

    #[test]
    fn unknown_keys_and_bad_yaml_are_refused_with_where() {
        let e = load_str("tls_server_config:\n  cert_fil: x\n").unwrap_err();
        assert!(e.contains("unknown field `cert_fil`"), "{e}");
        assert!(e.contains("line 2"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e = load_str("basic_auth_users: [\n").unwrap_err();
        assert!(!e.is_empty() && !e.contains('\n'), "{e}");
        let e = load_str("nonsense: 1\n").unwrap_err();
        assert!(e.contains("unknown field `nonsense`"), "{e}");
    }

    #[test]
    fn headers_are_the_toolkits_and_checked() {
        let c = load_str(
            "http_server_config:\n  headers:\n    X-Frame-Options: deny\n    Content-Security-Policy: \"default-src 'none'\"\n",
        )
        .unwrap();
        assert_eq!(c.headers.len(), 2);
        let e =
            load_str("http_server_config:\n  headers:\n    X-Frame-Options: allow\n").unwrap_err();
        assert!(e.contains("X-Frame-Options 'allow' is not one of"), "{e}");
        let e = load_str("http_server_config:\n  headers:\n    Server: me\n").unwrap_err();
        assert!(e.contains("header 'Server' cannot be set"), "{e}");
    }

    #[test]
    fn tls_needs_a_certificate_and_names_the_missing_file() {
        let e = load_str("tls_server_config:\n  key_file: k.pem\n").unwrap_err();
        assert!(e.contains("cert_file"), "{e}");
        let e =
            load_str("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n").unwrap_err();
        assert!(e.contains("/nonexistent/c.pem"), "{e}");
    }

    #[test]
    fn rate_limits_parse_go_durations() {
        let c = load_str("rate_limit:\n  interval: 1m30s\n  burst: 5\n").unwrap();
        assert_eq!(
            c.rate_limit,
            Some(RateLimit {
                interval: Duration::from_secs(90),
                burst: 5
            })
        );
        assert!(load_str("rate_limit:\n  interval: 0\n")
            .unwrap()
            .rate_limit
            .is_none());
        assert!(load_str("rate_limit:\n  interval: 1s\n")
            .unwrap_err()
            .contains("rate_limit.burst"));
        assert!(load_str("rate_limit:\n  interval: fast\n  burst: 1\n")
            .unwrap_err()
            .contains("'fast'"));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("1h"), Some(Duration::from_secs(3600)));
        for bad in ["", "1", "1d", "s", "-1s"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }
}
