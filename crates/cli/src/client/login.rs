//! `osac login`: writes the config file.

use anyhow::{anyhow, bail};

use super::args::LoginArgs;
use super::config::{ConfigFile, default_config_path, load_dev_credentials, normalize_url, save};
use super::output::emit;

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
        },
    )?;
    emit(&format!(
        "logged in to {url} (saved in {})\n",
        path.display()
    ))
}
