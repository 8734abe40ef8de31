//! Where the backend-independent tests keep their stores: a file in the test's temp directory,
//! or, with `SOMNA_TEST_BACKEND=postgres`, a schema of its own on the server that
//! `SOMNA_TEST_PG` names (the conformance run of `scripts/conformance.sh`). The same test then
//! checks the same answers on both backends.

use std::path::{Path, PathBuf};

/// The server URL when this run tests the server backend.
pub fn server() -> Option<String> {
    if std::env::var("SOMNA_TEST_BACKEND").as_deref() != Ok("postgres") {
        return None;
    }
    let url = std::env::var("SOMNA_TEST_PG")
        .expect("SOMNA_TEST_BACKEND=postgres needs SOMNA_TEST_PG (a postgresql:// URL)");
    Some(url)
}

/// The store location for `file` in the test directory `dir`: the file's path, or on the
/// server a schema named after both (the same for the same arguments, so a test can reopen it).
pub fn location(dir: &Path, file: &str) -> PathBuf {
    match server() {
        Some(base) => schema_url(&base, dir, file),
        None => dir.join(file),
    }
}

/// A schema of its own on the server `base` names, for `file` in the test directory `dir`.
pub fn schema_url(base: &str, dir: &Path, file: &str) -> PathBuf {
    let clean = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let tag = clean(&dir.file_name().unwrap_or_default().to_string_lossy());
    let stem = clean(file.split('.').next().unwrap_or(file));
    let sep = if base.contains('?') { '&' } else { '?' };
    PathBuf::from(format!(
        "{base}{sep}schema=t_{}_{tag}_{stem}",
        std::process::id()
    ))
}
