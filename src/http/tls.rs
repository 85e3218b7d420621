//! `tls_server_config` → a rustls server configuration (ring provider): the certificate and
//! key, the protocol versions, the TLS 1.2 cipher suites and key-exchange groups, and the client
//! certificate policy (`client_auth_type`, with the values and meaning of Go's
//! `tls.ClientAuthType`, and `client_allowed_sans`).
//!
//! Go offers what rustls does not (TLS 1.0 and 1.1, CBC and RSA key-exchange suites, P-521): a
//! file that allows such things among others still loads, with a note, because refusing them is
//! stricter than the file asked; a file that leaves nothing rustls can speak is refused.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, CipherSuite, DigitallySignedStruct, DistinguishedName, NamedGroup,
    RootCertStore, SignatureScheme,
};

use super::webconfig::{set, TlsSection};

/// The files `tls_server_config` names, resolved against the config file's directory.
pub(super) struct Files<'a> {
    pub cert: Option<&'a Path>,
    pub key: Option<&'a Path>,
    pub client_ca: Option<&'a Path>,
}

/// Go's `client_auth_type` values (crypto/tls `ClientAuthType`), `RequireClientCert` being the
/// toolkit's old name for `RequireAnyClientCert`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientAuth {
    NoClientCert,
    RequestClientCert,
    RequireAnyClientCert,
    VerifyClientCertIfGiven,
    RequireAndVerifyClientCert,
}

const CLIENT_AUTH: [(&str, ClientAuth); 6] = [
    ("NoClientCert", ClientAuth::NoClientCert),
    ("RequestClientCert", ClientAuth::RequestClientCert),
    ("RequireAnyClientCert", ClientAuth::RequireAnyClientCert),
    ("RequireClientCert", ClientAuth::RequireAnyClientCert),
    (
        "VerifyClientCertIfGiven",
        ClientAuth::VerifyClientCertIfGiven,
    ),
    (
        "RequireAndVerifyClientCert",
        ClientAuth::RequireAndVerifyClientCert,
    ),
];

/// Go's TLS 1.2 suite names (`tls.CipherSuites()`), with the rustls suite when it has one.
const SUITES: [(&str, Option<CipherSuite>); 14] = [
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        Some(CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        Some(CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        Some(CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", None),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", None),
];

/// Go's TLS 1.3 suite names: accepted and without effect, as in Go (TLS 1.3 suites are not
/// configurable there either).
const TLS13_SUITES: [&str; 3] = [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// The toolkit's curve names, with the rustls group when ring has one.
const CURVES: [(&str, Option<NamedGroup>); 4] = [
    ("CurveP256", Some(NamedGroup::secp256r1)),
    ("CurveP384", Some(NamedGroup::secp384r1)),
    ("CurveP521", None),
    ("X25519", Some(NamedGroup::X25519)),
];

/// `TLS10` ... `TLS13` as (major, minor) of the version number, 1.0 being 10. An error names
/// the key, not the value (errors never quote the file).
fn version(key: &str, v: &str) -> Result<u8, String> {
    match v {
        "TLS10" => Ok(10),
        "TLS11" => Ok(11),
        "TLS12" => Ok(12),
        "TLS13" => Ok(13),
        _ => Err(format!(
            "{key}: not a TLS version (TLS10, TLS11, TLS12 or TLS13)"
        )),
    }
}

fn read(what: &str, path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {what} {}: {e}", path.display()))
}

/// What is wrong with a PEM text, in words that quote none of it (the parser's own message
/// shows the line it stopped at).
fn pem_problem(e: &rustls::pki_types::pem::Error) -> &'static str {
    use rustls::pki_types::pem::Error;
    match e {
        Error::MissingSectionEnd { .. } => "a PEM section has no END line",
        Error::IllegalSectionStart { .. } => "a PEM BEGIN line is malformed",
        Error::Base64Decode(_) => "a PEM section is not valid base64",
        Error::NoItemsFound => "no PEM item of the kind needed",
        Error::SectionTooLarge => "a PEM section is larger than 256 MB",
        _ => "it cannot be read as PEM",
    }
}

/// Builds the rustls configuration; the error names the key or file at fault.
pub(super) fn build(
    t: &TlsSection,
    files: &Files<'_>,
    notes: &mut Vec<String>,
) -> Result<Arc<rustls::ServerConfig>, String> {
    // The certificate and key: a file wins over inline text, as in the toolkit.
    let (cert_pem, cert_from) = match (files.cert, set(&t.cert)) {
        (Some(p), _) => (read("cert_file", p)?, format!("cert_file {}", p.display())),
        (None, Some(text)) => (text.as_bytes().to_vec(), "cert".to_string()),
        (None, None) => return Err("missing one of cert or cert_file".into()),
    };
    let (key_pem, key_from) = match (files.key, set(&t.key)) {
        (Some(p), _) => (read("key_file", p)?, format!("key_file {}", p.display())),
        (None, Some(text)) => (text.as_bytes().to_vec(), "key".to_string()),
        (None, None) => return Err("missing one of key or key_file".into()),
    };
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{cert_from}: not PEM certificates ({})", pem_problem(&e)))?;
    if chain.is_empty() {
        return Err(format!("{cert_from}: no PEM certificate in it"));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| format!("{key_from}: no PEM private key in it ({})", pem_problem(&e)))?;

    // Protocol versions: rustls speaks TLS 1.2 and 1.3.
    let min = match set(&t.min_version) {
        Some(v) => version("min_version", v)?,
        None => 12,
    };
    let max = match set(&t.max_version) {
        Some(v) => version("max_version", v)?,
        None => 13,
    };
    if max < 12 {
        return Err(format!(
            "max_version {}: sockstat speaks TLS 1.2 and 1.3 only",
            set(&t.max_version).unwrap_or_default()
        ));
    }
    if min > max {
        return Err(format!(
            "min_version {} is above max_version {}",
            set(&t.min_version).unwrap_or("TLS12"),
            set(&t.max_version).unwrap_or("TLS13")
        ));
    }
    if min < 12 {
        notes.push(format!(
            "tls_server_config.min_version {}: sockstat speaks TLS 1.2 and 1.3 only",
            set(&t.min_version).unwrap_or_default()
        ));
    }
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)]
            .into_iter()
            .filter(|(v, _)| (min.max(12)..=max).contains(v))
            .map(|(_, p)| p)
            .collect();

    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(names) = &t.cipher_suites {
        let mut wanted = Vec::new();
        let mut unsupported = Vec::new();
        for name in names {
            if TLS13_SUITES.contains(&name.as_str()) {
                continue;
            }
            match SUITES.iter().find(|(n, _)| n == name) {
                Some((_, Some(s))) => wanted.push(*s),
                Some((_, None)) => unsupported.push(name.as_str()),
                None => return Err(
                    "cipher_suites: a name that is not one of Go's cipher suites (doc/serve.md)"
                        .into(),
                ),
            }
        }
        if !unsupported.is_empty() {
            notes.push(format!(
                "tls_server_config.cipher_suites: rustls does not implement {}; left out",
                unsupported.join(", ")
            ));
        }
        // TLS 1.3 suites stay; TLS 1.2 ones are those listed, in the file's order.
        let tls13: Vec<_> = provider
            .cipher_suites
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS13)
            .copied()
            .collect();
        let tls12: Vec<_> = wanted
            .iter()
            .filter_map(|w| provider.cipher_suites.iter().find(|s| s.suite() == *w))
            .copied()
            .collect();
        if tls12.is_empty() && min <= 12 && max == 12 {
            return Err(
                "cipher_suites: none of the TLS 1.2 suites listed is one rustls implements".into(),
            );
        }
        if !names.is_empty() {
            provider.cipher_suites = tls12.into_iter().chain(tls13).collect();
        }
    }
    if let Some(names) = &t.curve_preferences {
        let mut groups = Vec::new();
        for name in names {
            match CURVES.iter().find(|(n, _)| n == name) {
                Some((_, Some(g))) => {
                    if let Some(kx) = provider.kx_groups.iter().find(|k| k.name() == *g) {
                        groups.push(*kx);
                    }
                }
                Some((_, None)) => notes.push(format!(
                    "tls_server_config.curve_preferences: {name} is not implemented by rustls; left out"
                )),
                None => return Err(
                    "curve_preferences: a name that is not a curve (CurveP256, CurveP384, CurveP521, X25519)".into()
                ),
            }
        }
        if !names.is_empty() {
            if groups.is_empty() {
                return Err("curve_preferences: none of the curves listed is one rustls implements (CurveP256, CurveP384, X25519)".into());
            }
            provider.kx_groups = groups;
        }
    }
    let provider = Arc::new(provider);

    // Client certificates.
    let auth = match set(&t.client_auth_type) {
        None => ClientAuth::NoClientCert,
        Some(v) => CLIENT_AUTH
            .iter()
            .find(|(n, _)| *n == v)
            .map(|(_, a)| *a)
            .ok_or(
                "client_auth_type: not one of NoClientCert, RequestClientCert, \
                 RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert",
            )?,
    };
    let ca_pem = match (files.client_ca, set(&t.client_ca)) {
        (Some(p), _) => Some((
            read("client_ca_file", p)?,
            format!("client_ca_file {}", p.display()),
        )),
        (None, Some(text)) => Some((text.as_bytes().to_vec(), "client_ca".to_string())),
        (None, None) => None,
    };
    if ca_pem.is_some() && auth == ClientAuth::NoClientCert {
        return Err("client CAs are given but client_auth_type is NoClientCert: set client_auth_type RequireAndVerifyClientCert".into());
    }
    // Names are checked on a certificate only where one is required and verified: with any
    // other policy a client that sends none, or one nobody signed, would pass or claim any name
    // (rustls does not consult the verifier when no certificate comes). Refused at load, as
    // the exporter toolkit's pull request 436 proposes.
    let sans = t.client_allowed_sans.clone().unwrap_or_default();
    if !sans.is_empty() && auth != ClientAuth::RequireAndVerifyClientCert {
        let why = match auth {
            ClientAuth::NoClientCert => "no certificate is asked for",
            ClientAuth::RequestClientCert => {
                "a client may send no certificate, or one that no CA signed"
            }
            ClientAuth::RequireAnyClientCert => "the certificate's signer is not checked",
            _ => "a client may send no certificate",
        };
        return Err(format!(
            "client_allowed_sans is checked only with client_auth_type RequireAndVerifyClientCert \
             (with {}, {why}): set it, with client_ca_file",
            set(&t.client_auth_type).unwrap_or("NoClientCert")
        ));
    }
    let algorithms = provider.signature_verification_algorithms;
    let verifier: Option<Arc<dyn ClientCertVerifier>> = match auth {
        ClientAuth::NoClientCert => None,
        ClientAuth::RequestClientCert | ClientAuth::RequireAnyClientCert => {
            notes.push(format!(
                "tls_server_config.client_auth_type {}: client certificates are not verified; \
                 use RequireAndVerifyClientCert to authenticate clients",
                set(&t.client_auth_type).unwrap_or_default()
            ));
            Some(Arc::new(AnyClientCert {
                mandatory: auth == ClientAuth::RequireAnyClientCert,
                algorithms,
            }))
        }
        ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert => {
            let Some((pem, from)) = &ca_pem else {
                return Err(format!(
                    "client_auth_type {}: give the CA that signs client certificates in client_ca_file",
                    set(&t.client_auth_type).unwrap_or_default()
                ));
            };
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(pem) {
                let c =
                    c.map_err(|e| format!("{from}: not PEM certificates ({})", pem_problem(&e)))?;
                roots
                    .add(c)
                    .map_err(|e| format!("{from}: not a usable CA certificate ({e})"))?;
            }
            if roots.is_empty() {
                return Err(format!("{from}: no PEM certificate in it"));
            }
            let builder =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider));
            let builder = if auth == ClientAuth::VerifyClientCertIfGiven {
                builder.allow_unauthenticated()
            } else {
                builder
            };
            Some(
                builder
                    .build()
                    .map_err(|e| format!("{from}: cannot verify clients with it ({e})"))?,
            )
        }
    };
    let verifier = match (verifier, sans.is_empty()) {
        (Some(v), false) => Some(Arc::new(AllowedSans { inner: v, sans }) as Arc<_>),
        (v, _) => v,
    };

    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| format!("no protocol version left to speak ({e})"))?;
    let builder = match verifier {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("{key_from} does not go with {cert_from} or cannot be used ({e})"))?;
    config.ignore_client_order = t.prefer_server_cipher_suites.unwrap_or(true);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// `RequestClientCert` and `RequireAnyClientCert`: any certificate is taken without checking
/// who signed it (Go's meaning); the client still proves it holds the certificate's key, which
/// rustls checks with the provider's signature algorithms.
#[derive(Debug)]
struct AnyClientCert {
    mandatory: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for AnyClientCert {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// `client_allowed_sans`: after the inner policy accepts a certificate, one of its Subject
/// Alternative Names (DNS, e-mail, IP address or URI) must equal an entry of the list exactly.
#[derive(Debug)]
struct AllowedSans {
    inner: Arc<dyn ClientCertVerifier>,
    sans: Vec<String>,
}

/// The Subject Alternative Names of a DER certificate, spelled as Go spells them (an IPv4
/// address mapped into IPv6 is shown as IPv4).
fn subject_alt_names(der: &[u8]) -> Result<Vec<String>, rustls::Error> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
    let ext = cert
        .subject_alternative_name()
        .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
    let mut out = Vec::new();
    for name in ext.iter().flat_map(|e| e.value.general_names.iter()) {
        match name {
            GeneralName::DNSName(s) | GeneralName::RFC822Name(s) | GeneralName::URI(s) => {
                out.push((*s).to_string());
            }
            GeneralName::IPAddress(b) => {
                let ip = match b.len() {
                    4 => <[u8; 4]>::try_from(*b).ok().map(IpAddr::from),
                    16 => <[u8; 16]>::try_from(*b).ok().map(IpAddr::from),
                    _ => None,
                };
                if let Some(ip) = ip {
                    out.push(ip.to_canonical().to_string());
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

impl ClientCertVerifier for AllowedSans {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        if subject_alt_names(end_entity)?
            .iter()
            .any(|n| self.sans.contains(n))
        {
            Ok(verified)
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
