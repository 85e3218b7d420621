//! `sockstat serve --web.config.file`: the exporter toolkit's web configuration, with TLS from a
//! CA made here (rcgen), client certificates and bcrypt basic-auth users. A real Prometheus
//! scrapes it over TLS with a password and a client certificate, and the series it stored are
//! read back through its HTTP API; then the failures, each seen both by a TLS client written
//! here (rustls) and, where a scraper meets it, by Prometheus: a wrong password and none are
//! 401, plain HTTP to the TLS port is refused, a client without the required certificate (or
//! with one from another CA, or speaking only TLS 1.2 to a TLS 1.3 minimum) fails its
//! handshake, and a bad configuration file stops the exporter at start with one line naming it
//! and exit status 2.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::common::*;
use crate::serve::{
    get, parse_answer, results, serve_fails, serve_with, which, write_file, Answer, Prometheus,
};

/// A certificate and its key, PEM.
pub struct Pem {
    pub cert: String,
    pub key: String,
}

/// A CA, a server certificate for 127.0.0.1 and localhost, a client certificate it signed, and
/// a client certificate from another (self-signed) CA.
pub struct Pki {
    pub ca: String,
    pub server: Pem,
    pub client: Pem,
    pub rogue: Pem,
    /// Another CA, which signed `rogue` and `other_server`.
    pub other_ca: String,
    pub other_server: Pem,
}

fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let mut p = CertificateParams::new(Vec::<String>::new()).expect("params");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().expect("key");
    (p.self_signed(&key).expect("self-sign"), key)
}

fn leaf(
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
    issuer: &(rcgen::Certificate, KeyPair),
) -> Pem {
    let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .expect("params");
    p.distinguished_name.push(DnType::CommonName, names[0]);
    p.extended_key_usages = vec![usage];
    let key = KeyPair::generate().expect("key");
    let cert = p.signed_by(&key, &issuer.0, &issuer.1).expect("sign");
    Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    }
}

pub fn pki() -> Pki {
    let root = ca("sockstat test CA");
    let other = ca("another CA");
    Pki {
        ca: root.0.pem(),
        server: leaf(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
            &root,
        ),
        client: leaf(&["prometheus"], ExtendedKeyUsagePurpose::ClientAuth, &root),
        rogue: leaf(&["prometheus"], ExtendedKeyUsagePurpose::ClientAuth, &other),
        other_ca: other.0.pem(),
        other_server: leaf(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
            &other,
        ),
    }
}

/// How a test client connects.
#[derive(Clone, Copy)]
struct Client<'a> {
    ca: &'a str,
    cert: Option<&'a Pem>,
    basic: Option<(&'a str, &'a str)>,
    tls12_only: bool,
}

/// One GET over TLS; the error is the TLS or I/O failure as text.
fn https(addr: &str, method: &str, path: &str, c: &Client<'_>) -> Result<Answer, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(c.ca.as_bytes()).expect("CA PEM"))
        .expect("add CA");
    let versions: &[&rustls::SupportedProtocolVersion] = if c.tls12_only {
        &[&rustls::version::TLS12]
    } else {
        &[&rustls::version::TLS13, &rustls::version::TLS12]
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .expect("versions")
        .with_root_certificates(roots);
    let config = match c.cert {
        Some(p) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(p.cert.as_bytes()).expect("cert PEM")],
                PrivateKeyDer::from_pem_slice(p.key.as_bytes()).expect("key PEM"),
            )
            .expect("client cert"),
        None => builder.with_no_client_auth(),
    };
    let conn = rustls::ClientConnection::new(
        Arc::new(config),
        ServerName::IpAddress(Ipv4Addr::LOCALHOST.into()),
    )
    .map_err(|e| e.to_string())?;
    let sock = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, sock);
    let auth = match c.basic {
        Some((u, p)) => {
            use base64::Engine as _;
            format!(
                "Authorization: Basic {}\r\n",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        }
        None => String::new(),
    };
    let sent = write!(
        tls,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}\r\n"
    );
    if let Err(e) = sent {
        // A server that refused the client after the handshake (TLS 1.3 checks the client's
        // certificate then) may have closed before the request was written: its alert, if it
        // arrived, says why.
        let mut rest = Vec::new();
        return Err(match tls.read_to_end(&mut rest) {
            Err(alert) => format!("{alert} (after: {e})"),
            Ok(_) => e.to_string(),
        });
    }
    let mut raw = Vec::new();
    match tls.read_to_end(&mut raw) {
        Ok(_) => {}
        // The server closes the TCP connection after its close_notify: what was read is whole.
        Err(e) if !raw.is_empty() && e.kind() == std::io::ErrorKind::UnexpectedEof => {}
        Err(e) => return Err(e.to_string()),
    }
    if raw.is_empty() {
        return Err("the server closed the connection without answering".into());
    }
    Ok(parse_answer(&raw))
}

/// The web configuration of the happy path: TLS 1.2+, client certificates from the CA
/// required, one user.
pub fn web_config(dir: &Path, hash: &str) -> String {
    write_file(
        dir,
        "web.yml",
        &format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\n  \
             client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n  \
             min_version: TLS12\nbasic_auth_users:\n  prometheus: '{hash}'\n\
             http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n"
        ),
    )
}

/// Writes the PKI into `dir` (relative names, as the config file refers to them).
pub fn write_pki(dir: &Path, p: &Pki) {
    write_file(dir, "ca.pem", &p.ca);
    write_file(dir, "server.pem", &p.server.cert);
    write_file(dir, "server-key.pem", &p.server.key);
    write_file(dir, "client.pem", &p.client.cert);
    write_file(dir, "client-key.pem", &p.client.key);
    write_file(dir, "rogue.pem", &p.rogue.cert);
    write_file(dir, "rogue-key.pem", &p.rogue.key);
}

#[test]
fn tls_basic_auth_and_client_certificates_allow_the_right_client_only() {
    let p = pki();
    let dir = tempdir();
    write_pki(dir.path(), &p);
    // Cost 4 keeps the test fast; the cost does not change what is checked.
    let hash = bcrypt::hash("s3cret", 4).expect("bcrypt");
    let config = web_config(dir.path(), &hash);
    let server = serve_with(&[], &["--web.config.file", &config]);
    assert!(
        server.banner.contains("https://127.0.0.1:"),
        "{}",
        server.banner
    );
    let ok = Client {
        ca: &p.ca,
        cert: Some(&p.client),
        basic: Some(("prometheus", "s3cret")),
        tls12_only: false,
    };

    let a = https(&server.addr, "GET", "/metrics", &ok).expect("the right client");
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.body.contains("sockstat_up 1\n"), "{}", a.body);
    assert_eq!(a.header("X-Content-Type-Options"), Some("nosniff"), "{a:?}");
    // TLS 1.2 is allowed by min_version TLS12.
    let a = https(
        &server.addr,
        "GET",
        "/metrics",
        &Client {
            tls12_only: true,
            ..ok
        },
    )
    .expect("TLS 1.2");
    assert_eq!(a.status, 200);

    // Wrong password, unknown user, no credentials: 401 asking for Basic, and no metrics.
    for basic in [
        Some(("prometheus", "wrong")),
        Some(("someone", "s3cret")),
        None,
    ] {
        let a = https(&server.addr, "GET", "/metrics", &Client { basic, ..ok }).expect("an answer");
        assert_eq!(a.status, 401, "{basic:?}: {a:?}");
        assert!(
            a.header("WWW-Authenticate")
                .is_some_and(|h| h.starts_with("Basic")),
            "{a:?}"
        );
        assert!(!a.body.contains("sockstat_"), "{a:?}");
    }
    // Authentication comes before methods: no credentials and POST is still 401.
    let a = https(
        &server.addr,
        "POST",
        "/metrics",
        &Client { basic: None, ..ok },
    )
    .expect("an answer");
    assert_eq!(a.status, 401);
    let a = https(&server.addr, "POST", "/metrics", &ok).expect("an answer");
    assert_eq!(a.status, 405);

    // Plain HTTP to the TLS port: refused with a 400 that says why, no metrics.
    let a = get(&server.addr, "/metrics").expect("plain HTTP");
    assert_eq!(a.status, 400, "{a:?}");
    assert!(a.body.contains("HTTP request to an HTTPS server"), "{a:?}");
    assert!(!a.body.contains("sockstat_"));

    // No client certificate, or one from another CA: the handshake fails.
    for (what, cert) in [("no certificate", None), ("another CA's", Some(&p.rogue))] {
        let e = https(&server.addr, "GET", "/metrics", &Client { cert, ..ok }).expect_err(what);
        assert!(
            e.contains("CertificateRequired")
                || e.contains("UnknownCA")
                || e.contains("BadCertificate")
                || e.contains("HandshakeFailure")
                || e.contains("DecryptError")
                || e.contains("Broken pipe")
                || e.contains("reset"),
            "{what}: {e}"
        );
    }
    // The server's certificate is checked by the client too: one from another CA is refused.
    let e = https(
        &server.addr,
        "GET",
        "/metrics",
        &Client {
            ca: &p.rogue.cert,
            ..ok
        },
    );
    assert!(e.is_err(), "{e:?}");
    drop(server);

    // min_version TLS13 refuses a TLS 1.2 client.
    let strict = write_file(
        dir.path(),
        "strict.yml",
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\n  min_version: TLS13\n",
    );
    let server = serve_with(&[], &["--web.config.file", &strict]);
    let anyone = Client {
        ca: &p.ca,
        cert: None,
        basic: None,
        tls12_only: false,
    };
    assert_eq!(
        https(&server.addr, "GET", "/", &anyone)
            .expect("TLS 1.3")
            .status,
        200
    );
    let e = https(
        &server.addr,
        "GET",
        "/",
        &Client {
            tls12_only: true,
            ..anyone
        },
    )
    .expect_err("TLS 1.2 to a TLS 1.3 minimum");
    assert!(
        e.contains("ProtocolVersion") || e.contains("HandshakeFailure"),
        "{e}"
    );
}

#[test]
fn a_changed_password_or_certificate_takes_effect_without_a_restart() {
    let p = pki();
    let dir = tempdir();
    write_pki(dir.path(), &p);
    let config = web_config(dir.path(), &bcrypt::hash("first", 4).unwrap());
    let server = serve_with(&[], &["--web.config.file", &config]);
    let with = |password: &'static str, ca: &str| -> Result<u16, String> {
        https(
            &server.addr,
            "GET",
            "/",
            &Client {
                ca,
                cert: Some(&p.client),
                basic: Some(("prometheus", password)),
                tls12_only: false,
            },
        )
        .map(|a| a.status)
    };
    assert_eq!(with("first", &p.ca), Ok(200));
    web_config(dir.path(), &bcrypt::hash("second", 4).unwrap());
    assert_eq!(with("first", &p.ca), Ok(401));
    assert_eq!(with("second", &p.ca), Ok(200));
    // A renewed server certificate (here: from another CA) is served on the next connection.
    write_file(dir.path(), "server.pem", &p.other_server.cert);
    write_file(dir.path(), "server-key.pem", &p.other_server.key);
    assert!(with("second", &p.ca).is_err());
    assert_eq!(with("second", &p.other_ca), Ok(200));
    // A file that went bad refuses connections (and says so once) instead of serving without
    // its protection; fixed, it serves again.
    std::fs::write(&config, "basic_auth_users: [\n").unwrap();
    assert!(with("second", &p.other_ca).is_err());
    assert!(with("second", &p.other_ca).is_err());
    web_config(dir.path(), &bcrypt::hash("third", 4).unwrap());
    assert_eq!(with("third", &p.other_ca), Ok(200));
    let log = server.log_with(&["refusing connections until it is fixed", "reloaded"]);
    assert!(log.contains(&format!("reloaded {config}")), "{log}");
    assert_eq!(
        log.matches("refusing connections until it is fixed")
            .count(),
        1,
        "{log}"
    );
}

#[test]
fn a_prometheus_server_scrapes_over_tls_with_a_password_and_stores_the_series() {
    if !which("prometheus") {
        eprintln!("SKIPPED: prometheus not found (Debian package prometheus)");
        return;
    }
    let p = pki();
    let dir = tempdir();
    write_pki(dir.path(), &p);
    let config = web_config(dir.path(), &bcrypt::hash("s3cret", 4).unwrap());
    let h = Holder::spawn(&["comm:tlsprobe", "tcp4-listen:127.0.0.1:0"]);
    let port = h.item(1).sock().port();
    let server = serve_with(&[], &["--web.config.file", &config]);
    let job = |name: &str, cert: bool, password: &str| {
        format!(
            "  - job_name: {name}\n    scheme: https\n    tls_config:\n      ca_file: ca.pem\n{}    \
             basic_auth:\n      username: prometheus\n      password: {password}\n    \
             static_configs:\n      - targets: ['{}']\n",
            if cert {
                "      cert_file: client.pem\n      key_file: client-key.pem\n"
            } else {
                ""
            },
            server.addr
        )
    };
    let ca = p.ca.clone();
    let (client_pem, client_key) = (p.client.cert.clone(), p.client.key.clone());
    let prom = Prometheus::start(
        &[
            job("sockstat", true, "s3cret"),
            job("wrongpass", true, "guess"),
            job("nocert", false, "s3cret"),
        ]
        .concat(),
        &[
            ("ca.pem", &ca),
            ("client.pem", &client_pem),
            ("client-key.pem", &client_key),
        ],
    );

    // The holder's listener, stored with its command label.
    let q = format!("sockstat_listen_queue{{job=\"sockstat\",port=\"{port}\"}}");
    let v = prom.query_until(&q, |v| !results(v).is_empty());
    let r = results(&v);
    assert_eq!(r.len(), 1, "{v}");
    assert_eq!(r[0]["metric"]["command"], "tlsprobe", "{v}");
    assert_eq!(r[0]["metric"]["address"], "127.0.0.1", "{v}");
    assert_eq!(r[0]["metric"]["zone"], "global", "{v}");
    let v = prom.query_until("sockstat_up{job=\"sockstat\"}", |v| !results(v).is_empty());
    assert_eq!(results(&v)[0]["value"][1], "1", "{v}");

    // The other two jobs fail, and Prometheus says why. The three jobs scrape from one
    // address, which may have one password check waiting or running: a wrong password whose
    // check meets another job's is answered 429 without a check (doc/serve.md, "too many
    // password checks waiting"), so the refusal looked for is the wrong password's own 401,
    // which one of the job's scrapes gets.
    let v = prom.api_until("/api/v1/targets", |v| {
        v["data"]["activeTargets"].as_array().is_some_and(|t| {
            t.len() == 3
                && t.iter()
                    .all(|t| t["health"] != "unknown" && t["lastScrape"] != "0001-01-01T00:00:00Z")
                && t.iter().any(|t| {
                    t["labels"]["job"] == "wrongpass"
                        && t["lastError"].as_str().unwrap_or("").contains("401")
                })
        })
    });
    let targets = v["data"]["activeTargets"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let target = |job: &str| {
        targets
            .iter()
            .find(|t| t["labels"]["job"] == job)
            .unwrap_or_else(|| panic!("no {job} target in {v}"))
            .clone()
    };
    assert_eq!(target("sockstat")["health"], "up", "{v}");
    let wrong = target("wrongpass");
    assert_eq!(wrong["health"], "down", "{v}");
    assert!(
        wrong["lastError"].as_str().unwrap_or("").contains("401"),
        "{wrong}"
    );
    let nocert = target("nocert");
    assert_eq!(nocert["health"], "down", "{v}");
    let e = nocert["lastError"].as_str().unwrap_or("");
    assert!(e.contains("certificate") || e.contains("tls"), "{nocert}");
    assert!(
        prom.query_until("sockstat_up{job=\"wrongpass\"}", |_| true)["data"]["result"]
            .as_array()
            .is_some_and(|r| r.is_empty()),
        "a job refused with 401 stored no sockstat series"
    );
}

#[test]
fn a_bad_web_config_file_stops_the_exporter_with_one_line_naming_it() {
    let p = pki();
    let dir = tempdir();
    write_pki(dir.path(), &p);
    let d = dir.path();
    let tls = "tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\n";
    let cases: Vec<(String, &str)> =
        vec![
        (d.join("absent.yml").display().to_string(), "cannot read"),
        (
            write_file(d, "yaml.yml", "tls_server_config: [\n"),
            "yaml.yml",
        ),
        (
            write_file(d, "key.yml", "tls_server_config:\n  cert_flie: server.pem\n"),
            "line 2 column 3: tls_server_config: an unknown key (allowed: cert, key,",
        ),
        (
            write_file(d, "top.yml", "web: {}\n"),
            "line 1 column 1: an unknown key (allowed: tls_server_config,",
        ),
        (
            write_file(
                d,
                "nocert.yml",
                "tls_server_config:\n  cert_file: missing.pem\n  key_file: server-key.pem\n",
            ),
            "missing.pem",
        ),
        (
            write_file(
                d,
                "nokey.yml",
                "tls_server_config:\n  cert_file: server.pem\n",
            ),
            "missing one of key or key_file",
        ),
        (
            write_file(
                d,
                "mismatch.yml",
                "tls_server_config:\n  cert_file: server.pem\n  key_file: rogue-key.pem\n",
            ),
            "does not go with",
        ),
        (
            write_file(
                d,
                "hash.yml",
                &format!("{tls}basic_auth_users:\n  prometheus: s3cret\n"),
            ),
            "basic_auth_users: user 1 of 1 (in the file's order): the hash is not a bcrypt hash",
        ),
        (
            write_file(
                d,
                "auth.yml",
                &format!("{tls}  client_auth_type: RequireAndVerifyClientCert\n"),
            ),
            "client_ca_file",
        ),
        (
            write_file(
                d,
                "authtype.yml",
                &format!("{tls}  client_auth_type: Sometimes\n"),
            ),
            "client_auth_type: not one of NoClientCert,",
        ),
        (
            write_file(d, "version.yml", &format!("{tls}  min_version: TLS14\n")),
            "min_version: not a TLS version",
        ),
        (
            write_file(d, "max.yml", &format!("{tls}  max_version: TLS11\n")),
            "TLS 1.2 and 1.3 only",
        ),
        (
            write_file(
                d,
                "suite.yml",
                &format!("{tls}  cipher_suites: [TLS_FAST]\n"),
            ),
            "cipher_suites: a name that is not one of Go's cipher suites",
        ),
        (
            write_file(
                d,
                "header.yml",
                "http_server_config:\n  headers:\n    X-Frame-Options: always\n",
            ),
            "http_server_config.headers.X-Frame-Options: not one of deny, sameorigin",
        ),
        (
            write_file(d, "ca.yml", &format!("{tls}  client_ca_file: ca.pem\n")),
            "client_auth_type is NoClientCert",
        ),
    ];
    for (file, want) in &cases {
        let (code, err) = serve_fails(&["--web.config.file", file]);
        assert_eq!(code, Some(2), "{file}: {err}");
        assert_eq!(err.lines().count(), 1, "{file}: one line: {err}");
        assert!(err.contains(*want), "{file}: want {want:?}: {err}");
        assert!(
            err.contains(file.as_str()) || err.contains("web config"),
            "{file}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        // The wrong values are named by their key, never quoted (errors quote no file).
        for value in [
            "cert_flie",
            "s3cret",
            "Sometimes",
            "TLS14",
            "TLS_FAST",
            "always",
        ] {
            assert!(!err.contains(value), "{file}: {err}");
        }
    }
}

#[test]
fn what_rustls_lacks_is_left_out_with_a_note_and_the_rest_served() {
    let p = pki();
    let dir = tempdir();
    write_pki(dir.path(), &p);
    let config = write_file(
        dir.path(),
        "go.yml",
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\n  \
         min_version: TLS10\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, \
         TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n  curve_preferences: [CurveP521, X25519]\n  \
         client_auth_type: RequireAnyClientCert\n",
    );
    let server = serve_with(&[], &["--web.config.file", &config]);
    let notes = [
        "min_version TLS10",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "CurveP521",
        "client certificates are not verified",
    ];
    let log = server.log_with(&notes);
    for note in [
        "min_version TLS10",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "CurveP521",
        "client certificates are not verified",
    ] {
        assert!(log.contains(note), "no note on {note}: {log}");
    }
    // RequireAnyClientCert: a certificate from any CA is taken, none is refused.
    let c = |cert| Client {
        ca: &p.ca,
        cert,
        basic: None,
        tls12_only: true,
    };
    assert_eq!(
        https(&server.addr, "GET", "/", &c(Some(&p.rogue))).map(|a| a.status),
        Ok(200)
    );
    assert!(https(&server.addr, "GET", "/", &c(None)).is_err());
}

/// `client_allowed_sans` (issue 27 item 3): enforced where a verified client certificate is
/// required, and refused at load under every other `client_auth_type` (where a client without
/// a certificate, or with one nobody signed, would pass: the attack was
/// VerifyClientCertIfGiven, a SAN list, and a client with no certificate getting 200).
#[test]
fn client_allowed_sans_admits_only_listed_names() {
    let root = ca("sans CA");
    let other_ca = ca("other sans CA");
    let dir = tempdir();
    let d = dir.path();
    write_file(d, "ca.pem", &root.0.pem());
    let server_pem = leaf(&["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth, &root);
    write_file(d, "server.pem", &server_pem.cert);
    write_file(d, "server-key.pem", &server_pem.key);
    let allowed = leaf(
        &["prom-a.example"],
        ExtendedKeyUsagePurpose::ClientAuth,
        &root,
    );
    let by_ip = leaf(&["192.0.2.7"], ExtendedKeyUsagePurpose::ClientAuth, &root);
    let other = leaf(
        &["prom-b.example"],
        ExtendedKeyUsagePurpose::ClientAuth,
        &root,
    );
    // The right name, from a CA the exporter does not trust.
    let forged = leaf(
        &["prom-a.example"],
        ExtendedKeyUsagePurpose::ClientAuth,
        &other_ca,
    );
    let tls = "tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\n  \
               client_ca_file: ca.pem\n  client_allowed_sans: [prom-a.example, 192.0.2.7]\n";
    let config = write_file(
        d,
        "web.yml",
        &format!("{tls}  client_auth_type: RequireAndVerifyClientCert\n"),
    );
    let server = serve_with(&[], &["--web.config.file", &config]);
    let ca_pem = root.0.pem();
    let c = |cert| Client {
        ca: &ca_pem,
        cert,
        basic: None,
        tls12_only: false,
    };
    for (what, cert, want) in [
        ("a listed DNS name", Some(&allowed), true),
        ("a listed IP address", Some(&by_ip), true),
        ("a name not listed", Some(&other), false),
        ("a listed name from another CA", Some(&forged), false),
        ("no certificate", None, false),
    ] {
        for tls12_only in [false, true] {
            let got = https(
                &server.addr,
                "GET",
                "/",
                &Client {
                    tls12_only,
                    ..c(cert)
                },
            );
            if want {
                assert_eq!(got.map(|a| a.status), Ok(200), "{what}");
            } else {
                assert!(got.is_err(), "{what} (TLS 1.2 only: {tls12_only}): {got:?}");
            }
        }
    }
    drop(server);

    // Every other policy: refused at start, one line saying why.
    for auth in [
        "NoClientCert",
        "RequestClientCert",
        "RequireAnyClientCert",
        "RequireClientCert",
        "VerifyClientCertIfGiven",
    ] {
        let file = write_file(
            d,
            &format!("{auth}.yml"),
            &format!("{tls}  client_auth_type: {auth}\n").replace(
                "  client_ca_file: ca.pem\n",
                if auth == "NoClientCert" {
                    ""
                } else {
                    "  client_ca_file: ca.pem\n"
                },
            ),
        );
        let (code, err) = serve_fails(&["--web.config.file", &file]);
        assert_eq!(code, Some(2), "{auth}: {err}");
        assert_eq!(err.lines().count(), 1, "{auth}: {err}");
        assert!(
            err.contains(
                "client_allowed_sans is checked only with client_auth_type RequireAndVerifyClientCert"
            ) && err.contains(&format!("(with {auth}, ")),
            "{auth}: {err}"
        );
    }
}

/// A client without a certificate, against each `client_auth_type` (with a password
/// required too): the policies that require a certificate refuse it in the handshake; the
/// others let it reach the password check, which still applies.
#[test]
fn a_client_without_a_certificate_meets_each_client_auth_type_as_documented() {
    let p = pki();
    let dir = tempdir();
    write_pki(dir.path(), &p);
    let hash = bcrypt::hash("s3cret", 4).expect("bcrypt");
    for (auth, admitted) in [
        ("NoClientCert", true),
        ("RequestClientCert", true),
        ("RequireAnyClientCert", false),
        ("VerifyClientCertIfGiven", true),
        ("RequireAndVerifyClientCert", false),
    ] {
        let ca = if auth == "NoClientCert" {
            ""
        } else {
            "  client_ca_file: ca.pem\n"
        };
        let config = write_file(
            dir.path(),
            &format!("{auth}.yml"),
            &format!(
                "tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\n  \
                 client_auth_type: {auth}\n{ca}basic_auth_users:\n  prometheus: '{hash}'\n"
            ),
        );
        let server = serve_with(&[], &["--web.config.file", &config]);
        let client = |basic| Client {
            ca: &p.ca,
            cert: None,
            basic,
            tls12_only: false,
        };
        let with_password = https(
            &server.addr,
            "GET",
            "/metrics",
            &client(Some(("prometheus", "s3cret"))),
        );
        let without = https(&server.addr, "GET", "/metrics", &client(None));
        if admitted {
            assert_eq!(with_password.map(|a| a.status), Ok(200), "{auth}");
            assert_eq!(without.map(|a| a.status), Ok(401), "{auth}");
        } else {
            assert!(with_password.is_err(), "{auth}: {with_password:?}");
            assert!(without.is_err(), "{auth}: {without:?}");
        }
    }
}

#[test]
fn a_rate_limit_answers_429_past_its_burst() {
    let dir = tempdir();
    let config = write_file(
        dir.path(),
        "web.yml",
        "rate_limit:\n  interval: 1m\n  burst: 2\n",
    );
    let server = serve_with(&[], &["--web.config.file", &config]);
    let statuses: Vec<u16> = (0..3)
        .map(|_| get(&server.addr, "/").expect("GET").status)
        .collect();
    assert_eq!(statuses, vec![200, 200, 429]);
}

#[test]
fn the_example_web_config_works_as_shipped_once_its_files_exist() {
    let root = ca("example CA");
    let dir = tempdir();
    let d = dir.path();
    let server_pem = leaf(&["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth, &root);
    let client = leaf(
        &["prometheus-1.example.net"],
        ExtendedKeyUsagePurpose::ClientAuth,
        &root,
    );
    write_file(d, "server.crt", &server_pem.cert);
    write_file(d, "server.key", &server_pem.key);
    write_file(d, "prometheus-ca.crt", &root.0.pem());
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/contrib/web-config.yml"
    ))
    .expect("the example");
    let config = write_file(
        d,
        "web-config.yml",
        &example.replace("/etc/sockstat/tls/", &format!("{}/", d.display())),
    );
    let server = serve_with(&[], &["--web.config.file", &config]);
    let ca_pem = root.0.pem();
    let c = |password| Client {
        ca: &ca_pem,
        cert: Some(&client),
        basic: Some(("prometheus", password)),
        tls12_only: false,
    };
    let a = https(&server.addr, "GET", "/metrics", &c("change-me")).expect("GET");
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.header("X-Frame-Options"), Some("deny"));
    assert_eq!(
        https(&server.addr, "GET", "/metrics", &c("changeme")).map(|a| a.status),
        Ok(401)
    );
}

#[test]
fn a_public_address_warns_only_when_nothing_authenticates_clients() {
    let p = pki();
    let dir = tempdir();
    write_pki(dir.path(), &p);
    let open = write_file(
        dir.path(),
        "open.yml",
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\n",
    );
    let certs = write_file(
        dir.path(),
        "certs.yml",
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n",
    );
    // 0.0.0.0 with a port of 0: every interface, a free port, the warning decided at start.
    let warned = |config: &str| {
        let s = crate::serve::serve_on("0.0.0.0:0", &["--web.config.file", config]);
        // The warning follows the banner at once, from the same thread.
        let log = s.log_within(&["reachable from other hosts"], Duration::from_secs(2));
        log.contains("reachable from other hosts")
    };
    assert!(warned(&open), "TLS alone authenticates no one");
    assert!(!warned(&certs), "client certificates are verified");
}
