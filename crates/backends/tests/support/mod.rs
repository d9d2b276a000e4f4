//! What the backends test suites share: the example managers directory and managers
//! directories written for one test.
// Each suite uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use osac_backends::{DriverContext, Registry};

/// The repository's example managers directory.
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/managers")
}

/// A temporary directory holding `files` (file name, contents).
pub fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

/// The registry of the managers directory `dir`, with in-memory driver state.
pub async fn load(dir: &Path) -> Registry {
    Registry::load_dir(dir, &DriverContext::in_memory())
        .await
        .unwrap()
}

/// Why the managers directory `dir` does not load.
pub async fn load_err(dir: &Path) -> String {
    Registry::load_dir(dir, &DriverContext::in_memory())
        .await
        .unwrap_err()
        .to_string()
}
