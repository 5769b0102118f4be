//! Rendering pages with headless Chromium (`render: true`): the [`Chromium`] adapter of the
//! core's `Renderer` port, and the guarded proxy every browser request goes through.

mod chromium;
mod launch;
pub mod proxy;

pub use chromium::{Chromium, ChromiumConfig};
use std::path::{Path, PathBuf};

/// Names Chromium goes by on `PATH`.
const NAMES: &[&str] = &[
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chrome",
    "headless_shell",
];

/// The browser to render with: `explicit` (from `SARVCRAWL_CHROMIUM` or a flag) when given,
/// which must then be an executable file, else the first of Chromium's usual names on `PATH`.
pub fn locate(explicit: Option<&Path>) -> Result<Option<PathBuf>, String> {
    if let Some(p) = explicit {
        return if is_executable(p) {
            Ok(Some(p.to_path_buf()))
        } else {
            Err(format!("{} is not an executable file", p.display()))
        };
    }
    let Some(path) = std::env::var_os("PATH") else {
        return Ok(None);
    };
    Ok(std::env::split_paths(&path)
        .flat_map(|dir| NAMES.iter().map(move |n| dir.join(n)))
        .find(|p| is_executable(p)))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
