//! Server TLS: the certificate chain and private key (PEM files) are re-read when their content
//! changes, so a rotated certificate is served to new connections without a restart; an
//! optional client CA makes every client present a certificate signed by it (mTLS).
//!
//! The files are read once a second. A new certificate that cannot be used (unreadable file,
//! no certificate, no key, a key that does not match the certificate) is logged once and the
//! previous one stays in service. Connections already open keep the certificate they
//! negotiated.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::RootCertStore;
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often the files are checked for a new content.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// Where the server's TLS material lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// PEM certificate chain, the server's certificate first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of that certificate.
    pub key: PathBuf,
    /// PEM CA certificates: when set, clients must present a certificate signed by one.
    pub client_ca: Option<PathBuf>,
}

/// Why the TLS material cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: no PEM certificate in the file")]
    NoCertificate { path: PathBuf },
    #[error("{path}: invalid PEM: {detail}")]
    Pem { path: PathBuf, detail: String },
    #[error("{path}: no PEM private key in the file")]
    NoKey { path: PathBuf },
    #[error("client CA {path}: {detail}")]
    ClientCa { path: PathBuf, detail: String },
    #[error("certificate {cert} with key {key}: {source}")]
    Identity {
        cert: PathBuf,
        key: PathBuf,
        source: rustls::Error,
    },
}

/// The bytes of the files, to notice a change.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Material {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

impl Material {
    fn read(config: &TlsConfig) -> Result<Material, TlsError> {
        Ok(Material {
            cert: read(&config.cert)?,
            key: read(&config.key)?,
            client_ca: config.client_ca.as_deref().map(read).transpose()?,
        })
    }
}

fn certificates(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// The rustls configuration of `material`: ring crypto, TLS 1.2 and 1.3, ALPN h2 and
/// http/1.1 (gRPC needs h2; REST clients may use either).
fn build(config: &TlsConfig, material: &Material) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = certificates(&config.cert, &material.cert)?;
    let key = PrivateKeyDer::from_pem_slice(&material.key).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => TlsError::NoKey {
            path: config.key.clone(),
        },
        e => TlsError::Pem {
            path: config.key.clone(),
            detail: e.to_string(),
        },
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let identity = |source| TlsError::Identity {
        cert: config.cert.clone(),
        key: config.key.clone(),
        source,
    };
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(identity)?;
    let builder = match (&config.client_ca, &material.client_ca) {
        (Some(path), Some(pem)) => {
            let ca_error = |detail: String| TlsError::ClientCa {
                path: path.clone(),
                detail,
            };
            let mut roots = RootCertStore::empty();
            for cert in certificates(path, pem)? {
                roots.add(cert).map_err(|e| ca_error(e.to_string()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| ca_error(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    // Checks that the key is the certificate's.
    let mut server = builder.with_single_cert(chain, key).map_err(identity)?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(server))
}

struct State {
    /// What the files held at the last check (loaded or not).
    seen: Material,
    /// The configuration new connections get.
    current: Arc<ServerConfig>,
}

/// The server's TLS configuration, following the files.
pub struct TlsReloader {
    config: TlsConfig,
    state: RwLock<State>,
}

impl TlsReloader {
    /// Loads the files; an error here stops the server from starting.
    pub fn load(config: TlsConfig) -> Result<Arc<TlsReloader>, TlsError> {
        let seen = Material::read(&config)?;
        let current = build(&config, &seen)?;
        Ok(Arc::new(TlsReloader {
            config,
            state: RwLock::new(State { seen, current }),
        }))
    }

    /// The configuration for a new connection.
    pub fn current(&self) -> Arc<ServerConfig> {
        match self.state.read() {
            Ok(s) => s.current.clone(),
            Err(poisoned) => poisoned.into_inner().current.clone(),
        }
    }

    /// Re-reads the files; when they changed, builds and installs the new configuration.
    /// Returns whether a new configuration is in service; an error leaves the old one (and is
    /// reported once per change of the files).
    pub fn check(&self) -> Result<bool, TlsError> {
        let material = Material::read(&self.config)?;
        {
            let state = self.state.read().unwrap_or_else(|p| p.into_inner());
            if state.seen == material {
                return Ok(false);
            }
        }
        let built = build(&self.config, &material);
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        state.seen = material;
        state.current = built?;
        Ok(true)
    }

    /// Checks the files every [`RELOAD_INTERVAL`] until `stop` turns true.
    pub fn spawn(self: Arc<Self>, mut stop: watch::Receiver<bool>) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut last_error: Option<String> = None;
            loop {
                tokio::select! {
                    _ = stop.wait_for(|v| *v) => return,
                    _ = tokio::time::sleep(RELOAD_INTERVAL) => {}
                }
                let this = self.clone();
                let outcome = tokio::task::spawn_blocking(move || this.check()).await;
                match outcome {
                    Ok(Ok(true)) => {
                        last_error = None;
                        tracing::info!(cert = %self.config.cert.display(), "TLS certificate reloaded");
                    }
                    Ok(Ok(false)) => {}
                    Ok(Err(e)) => {
                        let text = e.to_string();
                        if last_error.as_deref() != Some(text.as_str()) {
                            tracing::error!(error = %text, "new TLS certificate not loaded; the previous one stays in service");
                            last_error = Some(text);
                        }
                    }
                    Err(e) => tracing::error!(error = %e, "TLS reload task failed"),
                }
            }
        })
    }
}
