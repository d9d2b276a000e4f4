//! Test certificates (rcgen) and a server started with a transport configuration (TLS,
//! connection limits), plus TLS clients that trust a given CA.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use osac_api::TransportConfig;
use osac_api::auth::AuthConfig;
use osac_server::{RunningServer, ServerConfig};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType,
};
use tempfile::TempDir;

/// A certificate authority.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A certificate and its key, PEM.
#[derive(Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA cert");
        Ca { cert, key }
    }

    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A server certificate for `localhost` and 127.0.0.1.
    pub fn server(&self) -> Issued {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    /// A client certificate for `name`.
    pub fn client(&self, name: &str) -> Issued {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params)
    }

    fn issue(&self, params: CertificateParams) -> Issued {
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.cert, &self.key).expect("sign");
        Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// Writes `text` to `path` the way a rotation tool does: a new file renamed over the old.
pub fn replace_file(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

/// A server with its own SQLite database and token file, started with `transport`.
pub struct LimitedServer {
    pub server: RunningServer,
    pub admin_token: String,
    pub dir: TempDir,
}

impl LimitedServer {
    /// A TLS transport whose files live in a fresh directory; returns it and (cert, key) paths.
    pub fn tls_files(dir: &Path, issued: &Issued) -> (PathBuf, PathBuf) {
        let cert = dir.join("server.crt");
        let key = dir.join("server.key");
        replace_file(&cert, &issued.cert_pem);
        replace_file(&key, &issued.key_pem);
        (cert, key)
    }

    pub async fn start(dir: TempDir, transport: TransportConfig) -> LimitedServer {
        let token_file = dir.path().join("tokens.json");
        let admin_token = osac_api::auth::ensure_admin_token(&token_file).expect("admin token");
        let server = osac_server::start(ServerConfig {
            listen: "127.0.0.1:0".parse().expect("addr"),
            database_url: format!("sqlite://{}", dir.path().join("osac.db").display()),
            auth: AuthConfig::TokenFile(token_file),
            managers_dir: None,
            controller: super::controller_config(),
            ip_discovery_timeout: ServerConfig::DEFAULT_IP_DISCOVERY_TIMEOUT,
            fabric: Default::default(),
            sim_latency: Default::default(),
            transport,
            limits: Default::default(),
        })
        .await
        .expect("server start");
        LimitedServer {
            server,
            admin_token,
            dir,
        }
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    pub async fn finish(self) {
        self.server.shutdown().await;
    }
}

/// A REST client that trusts only `ca_pem` (and presents `identity` when given).
pub fn https_client(ca_pem: &str, identity: Option<&Issued>) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("CA"))
        .timeout(std::time::Duration::from_secs(10));
    if let Some(id) = identity {
        let pem = format!("{}{}", id.cert_pem, id.key_pem);
        b = b.identity(reqwest::Identity::from_pem(pem.as_bytes()).expect("identity"));
    }
    b.build().expect("client")
}

/// A raw TLS client configuration (ring) that trusts only `ca_pem`.
pub fn rustls_client(ca_pem: &str) -> Arc<rustls::ClientConfig> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.expect("pem")).expect("root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// The DER of the first certificate of a PEM text.
pub fn der_of(pem: &str) -> Vec<u8> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("pem")
        .to_vec()
}
