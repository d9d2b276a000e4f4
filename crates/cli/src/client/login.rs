//! `osac login`: writes the config file.

use anyhow::{anyhow, bail};

use super::args::LoginArgs;
use super::config::{ConfigFile, default_config_path, load_dev_credentials, normalize_url, save};
use super::output::emit;
use super::tls::TlsOptions;

/// Saves URL and token (flags override a dev-credentials file) in the config file (0600).
pub fn login(a: &LoginArgs) -> anyhow::Result<()> {
    let dev = a
        .dev_credentials
        .as_deref()
        .map(load_dev_credentials)
        .transpose()?;
    let url = a
        .url
        .clone()
        .or_else(|| dev.as_ref().map(|d| d.url.clone()));
    let token = a
        .token
        .clone()
        .or_else(|| dev.as_ref().map(|d| d.admin_token.clone()));
    let (Some(url), Some(token)) = (url, token) else {
        bail!(
            "give --url URL --token TOKEN, or --dev-credentials PATH (written by `osac server --dev`)"
        );
    };
    if token.trim().is_empty() {
        bail!("the token is empty");
    }
    let url = normalize_url(&url)?;
    // Kept as an absolute path: later calls run from any directory.
    let ca_file = a
        .ca_file
        .clone()
        .or_else(|| dev.as_ref().and_then(|d| d.ca_file.clone()))
        .map(|f| std::fs::canonicalize(&f).map_err(|e| anyhow!("--ca-file {}: {e}", f.display())))
        .transpose()?;
    let tls = TlsOptions {
        ca_file: ca_file.clone(),
        insecure_skip_verify: a.insecure_skip_tls_verify,
    };
    tls.warn_if_insecure();
    // A CA file that is not PEM certificates is refused now, not at the next call.
    let _ = tls.client_builder()?;
    let path = a
        .config
        .clone()
        .or_else(default_config_path)
        .ok_or_else(|| anyhow!("HOME is not set: give --config FILE"))?;
    save(
        &path,
        &ConfigFile {
            url: Some(url.clone()),
            token: Some(token.trim().to_string()),
            ca_file,
            insecure_skip_tls_verify: a.insecure_skip_tls_verify,
        },
    )?;
    emit(&format!(
        "logged in to {url} (saved in {})\n",
        path.display()
    ))
}
