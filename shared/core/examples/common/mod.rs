//! What the examples share.

use std::path::{Path, PathBuf};

/// Every `.html` and `.htm` file under `dir`, into `out`.
pub fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            html_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "html" || x == "htm") {
            out.push(path);
        }
    }
}
