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
    /// Kept in the file's order, so that an error can name a user by its place.
    #[serde(default)]
    basic_auth_users: Option<serde_yaml_ng::Mapping>,
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
    /// The hash an unknown user is checked against: the users' cost, matching no password.
    pub decoy: String,
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
/// wrong in it: the key, and the line where the YAML parser knows it, never the file's text
/// (a password hash, or the first line of a file that is no configuration at all, must not
/// reach a log). Run it with the credentials the files may be read with: the caller's, when
/// sockstat has more privilege than its caller (`crate::http::Server::bind`).
pub fn load(path: &Path) -> Result<WebConfig, String> {
    let shown = path.display();
    let text = std::fs::read(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let text = String::from_utf8(text).map_err(|_| format!("{shown}: not UTF-8 text"))?;
    load_text(path, &text).map_err(|e| format!("{shown}: {e}"))
}

/// The top-level keys, and the keys of each section, as the toolkit spells them.
const TOP_KEYS: [&str; 4] = [
    "tls_server_config",
    "http_server_config",
    "basic_auth_users",
    "rate_limit",
];
const TLS_KEYS: [&str; 13] = [
    "cert",
    "key",
    "client_ca",
    "cert_file",
    "key_file",
    "client_auth_type",
    "client_ca_file",
    "client_allowed_sans",
    "min_version",
    "max_version",
    "cipher_suites",
    "prefer_server_cipher_suites",
    "curve_preferences",
];
const HTTP_KEYS: [&str; 2] = ["http2", "headers"];
const RATE_KEYS: [&str; 2] = ["interval", "burst"];

/// What serde says a value should have been, in words a YAML author knows; anything else it
/// says is left out rather than echoed.
const EXPECTED: [(&str, &str); 10] = [
    ("a string", "text"),
    ("a YAML mapping", "a map of keys"),
    ("a borrowed string", "text"),
    ("a sequence", "a list"),
    ("a map", "a map of keys"),
    ("a boolean", "true or false"),
    ("u32", "a whole number"),
    ("struct TlsSection", "a map of keys"),
    ("struct HttpSection", "a map of keys"),
    ("struct RateLimitSection", "a map of keys"),
];

/// The keys of a section, for messages.
fn section_keys(section: &str) -> &'static [&'static str] {
    match section {
        "tls_server_config" => &TLS_KEYS,
        "http_server_config" => &HTTP_KEYS,
        "rate_limit" => &RATE_KEYS,
        _ => &[],
    }
}

/// A YAML or structure error as one line: where (line and column, as the parser counts
/// them), under which keys, and what kind of mistake, built from this file's own words only.
/// serde's message quotes the offending text (`unknown field <a key>`, `invalid type: string
/// <a value>`) and may name keys that are the file's (a user's name): it is classified, never
/// copied, and a key is named only when it is one of the format's own.
fn yaml_error(e: &serde_yaml_ng::Error) -> String {
    let text = e.to_string();
    let at = e
        .location()
        .map(|l| format!("line {} column {}: ", l.line(), l.column()))
        .unwrap_or_default();
    // serde_yaml_ng prefixes the keys it followed: `http_server_config.http2: invalid ...`.
    let (path, body) = match text.split_once(": ") {
        Some((p, b)) if TOP_KEYS.contains(&p.split('.').next().unwrap_or("")) => (Some(p), b),
        _ => (None, text.as_str()),
    };
    let mut keys: Vec<&str> = Vec::new();
    if let Some(p) = path {
        let mut parts = p.split('.');
        if let Some(top) = parts
            .next()
            .and_then(|t| TOP_KEYS.iter().find(|k| **k == t))
        {
            keys.push(top);
            if let Some(k) = parts
                .next()
                .and_then(|k| section_keys(top).iter().find(|s| **s == k))
            {
                keys.push(k);
            }
        }
    }
    let what = if body.starts_with("unknown field") {
        let allowed: &[&str] = match keys.first() {
            None => &TOP_KEYS,
            Some(top) => section_keys(top),
        };
        if allowed.is_empty() {
            "an unknown key".to_string()
        } else {
            format!("an unknown key (allowed: {})", allowed.join(", "))
        }
    } else if body.starts_with("invalid type") || body.starts_with("invalid value") {
        // The expectation is serde's, after the last ", expected " (the quoted text comes
        // before it); kept only when it is one this file knows.
        let expected = body
            .rsplit(", expected ")
            .next()
            .map(|x| x.split(" at line ").next().unwrap_or(x).trim());
        match expected.and_then(|x| EXPECTED.iter().find(|(s, _)| *s == x)) {
            Some((_, words)) => format!("a value of the wrong kind (expected {words})"),
            None => "a value of the wrong kind".to_string(),
        }
    } else if body.starts_with("duplicate") {
        "a key given twice".to_string()
    } else if body.starts_with("missing field") {
        "a required key is missing".to_string()
    } else {
        "not valid YAML".to_string()
    };
    if keys.is_empty() {
        format!("{at}{what}")
    } else {
        format!("{at}{}: {what}", keys.join("."))
    }
}

fn load_text(path: &Path, text: &str) -> Result<WebConfig, String> {
    // An empty file (or one of comments only) is a valid configuration: plain HTTP, no users.
    let file: FileConfig = match serde_yaml_ng::from_str::<Option<FileConfig>>(text) {
        Ok(f) => f.unwrap_or_default(),
        Err(e) => return Err(yaml_error(&e)),
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

    let users = users(file.basic_auth_users.as_ref())?;
    let decoy = decoy(&users, &mut notes)?;
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
        let names = HEADERS.map(|(h, _)| h);
        for (name, value) in http.headers.iter().flatten() {
            let Some((name, allowed)) = HEADERS.iter().find(|(h, _)| h == name) else {
                return Err(format!(
                    "http_server_config.headers: a header that cannot be set (allowed: {})",
                    names.join(", ")
                ));
            };
            if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
                return Err(format!(
                    "http_server_config.headers.{name}: not one of {}",
                    allowed.join(", ")
                ));
            }
            if value.is_empty() {
                continue;
            }
            if value.bytes().any(|b| b.is_ascii_control()) {
                return Err(format!(
                    "http_server_config.headers.{name}: the value has a control character"
                ));
            }
            headers.push((name.to_string(), value.clone()));
        }
    }

    let rate_limit = match &file.rate_limit {
        None => None,
        Some(r) => {
            let interval = match set(&r.interval) {
                None => Duration::ZERO,
                Some(s) => parse_go_duration(s).ok_or(
                    "rate_limit.interval: not a duration like 1s, 100ms or 1m30s".to_string(),
                )?,
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
        decoy,
        headers,
        rate_limit,
        notes,
        files,
    })
}

/// The bcrypt costs a hash may have (as Go's bcrypt: `MinCost` 4 to `MaxCost` 31).
pub const BCRYPT_COSTS: std::ops::RangeInclusive<u32> = 4..=31;

/// `basic_auth_users`, checked: every name a string without ':' (basic authentication cannot
/// carry it), every value a bcrypt hash (`$2a$`, `$2b$`, `$2y$`) of a cost in [`BCRYPT_COSTS`]
/// whose salt and digest decode. A user is named in an error by its place in the file, never
/// by its name or hash.
fn users(section: Option<&serde_yaml_ng::Mapping>) -> Result<BTreeMap<String, String>, String> {
    use base64::Engine as _;
    // bcrypt's own alphabet, without padding: what the hash's salt and digest are written in.
    const BCRYPT_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
        &base64::alphabet::BCRYPT,
        base64::engine::general_purpose::NO_PAD,
    );
    let mut out = BTreeMap::new();
    let Some(section) = section else {
        return Ok(out);
    };
    let n = section.len();
    for (i, (name, hash)) in section.iter().enumerate() {
        let which = format!(
            "basic_auth_users: user {} of {n} (in the file's order)",
            i + 1
        );
        let (Some(name), Some(hash)) = (name.as_str(), hash.as_str()) else {
            return Err(format!("{which}: the name and the hash must be text"));
        };
        if name.contains(':') {
            return Err(format!(
                "{which}: the name contains ':', which basic authentication cannot carry"
            ));
        }
        let how = "make one with htpasswd -nBC 10 \"\" | tr -d ':\\n'";
        let Ok(parts) = hash.parse::<bcrypt::HashParts>() else {
            return Err(format!("{which}: the hash is not a bcrypt hash; {how}"));
        };
        if !BCRYPT_COSTS.contains(&parts.get_cost()) {
            return Err(format!(
                "{which}: the hash's bcrypt cost is not between 4 and 31; {how}"
            ));
        }
        let digest_ok = |s: &str, len: usize| BCRYPT_BASE64.decode(s).is_ok_and(|b| b.len() == len);
        // "$2b$10$" + 22 characters of salt (16 bytes) + 31 of digest (23 bytes).
        let body = &hash[hash.len() - 53..];
        if !digest_ok(&body[..22], 16) || !digest_ok(&body[22..], 23) {
            return Err(format!(
                "{which}: the hash's salt or digest is not bcrypt's base64; {how}"
            ));
        }
        if out.insert(name.to_string(), hash.to_string()).is_some() {
            return Err(format!("{which}: the name is given twice"));
        }
    }
    Ok(out)
}

/// The hash an unknown user's password is checked against, so that the answer takes as long as
/// for a known user: a well-formed bcrypt hash that no password matches, of the users' cost (the
/// highest, when they differ: then a note says that names can be told apart by timing).
fn decoy(users: &BTreeMap<String, String>, notes: &mut Vec<String>) -> Result<String, String> {
    let costs: std::collections::BTreeSet<u32> = users
        .values()
        .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
        .map(|p| p.get_cost())
        .collect();
    let cost = costs.last().copied().unwrap_or(10);
    if costs.len() > 1 {
        notes.push(format!(
            "basic_auth_users: the hashes have different bcrypt costs ({}); an unknown user is \
             checked at cost {cost}, so a user of a lower cost can be told from an unknown one by \
             how long a wrong password takes: give every user the same cost",
            costs
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // A cost-4 hash (random salt), relabelled with the users' cost: verifying against it costs
    // what a real hash of that cost costs, and its digest is no digest of any password at that
    // cost. (Which password it was made from does not matter: an unknown user is refused
    // whatever the check says.)
    let four = bcrypt::hash("sockstat: the decoy of unknown users", 4)
        .map_err(|e| format!("cannot make the decoy hash for unknown users: {e}"))?;
    Ok(format!("$2b${cost:02}${}", &four[four.len() - 53..]))
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
        assert_eq!(
            e,
            "basic_auth_users: user 1 of 1 (in the file's order): the hash is not a bcrypt hash; \
             make one with htpasswd -nBC 10 \"\" | tr -d ':\\n'"
        );
        let e = load_str(&format!(
            "basic_auth_users:\n  ok: '{FAKEPASSWORD}'\n  'a:b': '{FAKEPASSWORD}'\n"
        ))
        .unwrap_err();
        assert!(
            e.starts_with(
                "basic_auth_users: user 2 of 2 (in the file's order): the name contains ':'"
            ),
            "{e}"
        );
    }

    /// bcrypt's costs run from 4 to 31: a hash outside is refused at load, naming the user by
    /// place (not by name or hash); a salt or digest that is not bcrypt's base64 too.
    #[test]
    fn hashes_outside_bcrypts_costs_or_alphabet_are_refused() {
        let body = &FAKEPASSWORD[7..];
        for cost in ["03", "32", "99"] {
            let e =
                load_str(&format!("basic_auth_users:\n  prom: '$2y${cost}${body}'\n")).unwrap_err();
            assert!(e.contains("cost is not between 4 and 31"), "{cost}: {e}");
            assert!(!e.contains("prom") && !e.contains(body), "{e}");
        }
        for cost in ["04", "31"] {
            load_str(&format!("basic_auth_users:\n  prom: '$2y${cost}${body}'\n")).unwrap();
        }
        let bad = format!("$2y$10${}", "!".repeat(53));
        let e = load_str(&format!("basic_auth_users:\n  prom: '{bad}'\n")).unwrap_err();
        assert!(e.contains("salt or digest"), "{e}");
    }

    /// An unknown user is checked against a decoy of the users' cost; with several costs, the
    /// highest, and a note says names can then be told apart.
    #[test]
    fn the_decoy_has_the_users_cost() {
        let cost_of = |h: &str| h.parse::<bcrypt::HashParts>().unwrap().get_cost();
        let c = load_str(&format!("basic_auth_users:\n  prom: '{FAKEPASSWORD}'\n")).unwrap();
        assert_eq!(cost_of(&c.decoy), 10);
        assert!(!bcrypt::verify("fakepassword", &c.decoy).unwrap());
        let five = bcrypt::hash("x", 5).unwrap();
        let c = load_str(&format!("basic_auth_users:\n  a: '{five}'\n")).unwrap();
        assert_eq!(cost_of(&c.decoy), 5);
        assert!(c
            .notes
            .iter()
            .all(|n| !n.contains("different bcrypt costs")));
        let c = load_str(&format!(
            "basic_auth_users:\n  a: '{five}'\n  b: '{FAKEPASSWORD}'\n"
        ))
        .unwrap();
        assert_eq!(cost_of(&c.decoy), 10);
        assert!(
            c.notes
                .iter()
                .any(|n| n.contains("different bcrypt costs (5, 10)")),
            "{:?}",
            c.notes
        );
    }

    #[test]
    fn unknown_keys_and_bad_yaml_are_refused_with_where() {
        let e = load_str("tls_server_config:\n  cert_fil: x\n").unwrap_err();
        assert!(
            e.starts_with(
                "line 2 column 3: tls_server_config: an unknown key (allowed: cert, key,"
            ),
            "{e}"
        );
        let e = load_str("basic_auth_users: [\n").unwrap_err();
        assert_eq!(
            e,
            "line 1 column 19: basic_auth_users: a value of the wrong kind (expected a map of keys)"
        );
        let e = load_str("rate_limit:\n  burst: many\n").unwrap_err();
        assert_eq!(
            e,
            "line 2 column 10: rate_limit.burst: a value of the wrong kind (expected a whole number)"
        );
        let e = load_str("tls_server_config:\n\tcert: x\n").unwrap_err();
        assert!(e.contains("not valid YAML") && !e.contains('\n'), "{e}");
        let e = load_str("nonsense: 1\n").unwrap_err();
        assert!(
            e.starts_with("line 1 column 1: an unknown key (allowed: tls_server_config,"),
            "{e}"
        );
        let e = load_str("tls_server_config: [a]\n").unwrap_err();
        assert!(
            e.contains("a value of the wrong kind (expected a map of keys)"),
            "{e}"
        );
    }

    /// No error quotes the file: a file that is no configuration at all (a password file, a
    /// key) and values that are wrong are named by line, key and kind only.
    #[test]
    fn errors_never_quote_the_file() {
        let secret = "s3cr3t-line-Zq9";
        let hash = "$6$saltsalt$hashhashhash";
        let texts = [
            format!("root:{hash}:19000:0:99999:7:::\n"),
            format!("{secret}\n"),
            format!("{secret}: 1\n"),
            format!("tls_server_config:\n  {secret}: x\n"),
            format!("tls_server_config: {secret}\n"),
            format!("tls_server_config:\n  min_version: {secret}\n  cert: x\n  key: y\n"),
            format!("tls_server_config:\n  cipher_suites: [{secret}]\n  cert: x\n  key: y\n"),
            format!("tls_server_config:\n  curve_preferences: [{secret}]\n  cert: x\n  key: y\n"),
            format!("tls_server_config:\n  client_auth_type: {secret}\n  cert: x\n  key: y\n"),
            format!("tls_server_config:\n  cert: {secret}\n  key: {secret}\n"),
            format!("basic_auth_users:\n  {secret}: {secret}\n"),
            format!("basic_auth_users:\n  {secret}: [{secret}]\n"),
            format!("basic_auth_users: {secret}\n"),
            format!("http_server_config:\n  headers:\n    {secret}: x\n"),
            format!("http_server_config:\n  headers:\n    X-Frame-Options: {secret}\n"),
            format!("http_server_config:\n  http2: {secret}\n"),
            format!("rate_limit:\n  interval: {secret}\n  burst: 1\n"),
            format!("rate_limit:\n  burst: {secret}\n"),
            "-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEA\n"
                .to_string(),
        ];
        for text in &texts {
            let e = load_str(text).unwrap_err();
            for needle in [secret, hash, "MIIBVQ", "root"] {
                assert!(!e.contains(needle), "{text:?} gave {e}");
            }
            assert!(!e.contains('\n'), "{e}");
        }
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
        assert_eq!(
            e,
            "http_server_config.headers.X-Frame-Options: not one of deny, sameorigin"
        );
        let e = load_str("http_server_config:\n  headers:\n    Server: me\n").unwrap_err();
        assert!(e.contains("a header that cannot be set"), "{e}");
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
        assert_eq!(
            load_str("rate_limit:\n  interval: fast\n  burst: 1\n").unwrap_err(),
            "rate_limit.interval: not a duration like 1s, 100ms or 1m30s"
        );
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("1h"), Some(Duration::from_secs(3600)));
        for bad in ["", "1", "1d", "s", "-1s"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }
}
