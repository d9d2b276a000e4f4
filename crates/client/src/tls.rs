//! TLS of the client. An `https://` server is verified against the system's root certificates,
//! or, when a CA file is given (`--ca-file`, `OSAC_CA_FILE`, or remembered by `osac login`),
//! against the certificates of that file only; a certificate of that file presented as the
//! server's own is accepted too (a self-signed `openssl req -x509` certificate, see
//! [`pinned`]), its host names still checked. `--insecure-skip-tls-verify` turns the
//! verification off and prints a warning on stderr every time it is used.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

mod pinned;

/// How the client checks the server's certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM CA certificates to trust instead of the system roots.
    pub ca_file: Option<PathBuf>,
    /// Accept any certificate (no identity check).
    pub insecure_skip_verify: bool,
}

/// Printed on stderr whenever `--insecure-skip-tls-verify` is in effect.
pub const INSECURE_WARNING: &str = "WARNING: --insecure-skip-tls-verify is in effect: the server's identity is NOT checked. \
Anyone on the network path can pose as the server and read your token and everything you send. \
Use --ca-file with the server's CA instead.";

/// Why the TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("CA file {path}: cannot read it: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("CA file {path}: {detail}")]
    Invalid { path: PathBuf, detail: String },
}

impl TlsOptions {
    /// Prints [`INSECURE_WARNING`] when verification is off.
    pub fn warn_if_insecure(&self) {
        if self.insecure_skip_verify {
            eprintln!("{INSECURE_WARNING}");
        }
    }

    /// A reqwest client builder with these settings (rustls, ring).
    pub fn client_builder(&self) -> Result<reqwest::ClientBuilder, TlsSetupError> {
        let b = reqwest::Client::builder().use_rustls_tls();
        if self.insecure_skip_verify {
            return Ok(b.danger_accept_invalid_certs(true));
        }
        match &self.ca_file {
            Some(path) => Ok(b.use_preconfigured_tls(pinned_config(path)?)),
            None => Ok(b),
        }
    }
}

/// The rustls configuration that trusts the CA file's certificates as roots and as pinned
/// server certificates.
fn pinned_config(path: &Path) -> Result<rustls::ClientConfig, TlsSetupError> {
    let invalid = |detail: String| TlsSetupError::Invalid {
        path: path.to_path_buf(),
        detail,
    };
    let certs = read_ca(path)?;
    let mut roots = RootCertStore::empty();
    for cert in &certs {
        roots
            .add(cert.clone())
            .map_err(|e| invalid(format!("not a usable CA certificate: {e}")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| invalid(e.to_string()))?;
    let verifier = pinned::PinnedOrCa::new(certs, webpki, provider.clone());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth())
}

fn read_ca(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let pem = std::fs::read(path).map_err(|source| TlsSetupError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let invalid = |detail: String| TlsSetupError::Invalid {
        path: path.to_path_buf(),
        detail,
    };
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(e.to_string()))?;
    if certs.is_empty() {
        return Err(invalid("no PEM certificate in the file".into()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_ca_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pem");
        let err = TlsOptions {
            ca_file: Some(missing.clone()),
            insecure_skip_verify: false,
        }
        .client_builder()
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("nope.pem") && err.contains("cannot read"),
            "{err}"
        );
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = TlsOptions {
            ca_file: Some(empty),
            insecure_skip_verify: false,
        }
        .client_builder()
        .unwrap_err()
        .to_string();
        assert!(err.contains("no PEM certificate"), "{err}");
    }
}
