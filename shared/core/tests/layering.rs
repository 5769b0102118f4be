//! The core's modules depend on each other in one direction only: no module reaches, through
//! the paths it names (`crate::...`, `super::...`), a module that reaches back to it. The graph
//! is read from the source files themselves, so a change that closes a circle fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            sources(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The module a file defines, as a path from the crate root (`app/task`; `app` for
/// `app/mod.rs`; `` for `lib.rs`).
fn module_of(root: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(root).unwrap_or(file).with_extension("");
    let rel = rel.to_string_lossy().replace('\\', "/");
    match rel.as_str() {
        "lib" => String::new(),
        r => r.strip_suffix("/mod").unwrap_or(r).to_string(),
    }
}

/// The longest known module a path names (`engine/budget` for `engine::budget::Budget`).
fn resolve(known: &BTreeSet<String>, segments: &[&str]) -> Option<String> {
    (1..=segments.len())
        .rev()
        .map(|n| segments[..n].join("/"))
        .find(|m| known.contains(m))
}

/// Code outside `#[cfg(test)]` modules (tests may reach anywhere).
fn without_tests(text: &str) -> String {
    match text.find("#[cfg(test)]") {
        Some(i) => text[..i].to_string(),
        None => text.to_string(),
    }
}

#[test]
fn no_module_of_the_core_depends_on_itself_through_others() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files).unwrap();
    let modules: BTreeMap<String, PathBuf> = files
        .iter()
        .map(|f| (module_of(&root, f), f.clone()))
        .collect();
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &modules {
        let text = without_tests(&std::fs::read_to_string(file).unwrap());
        // `super` of a file module is its parent; of a `mod.rs` module, the parent's parent.
        let is_dir_module = file.ends_with("mod.rs");
        let parent: Vec<&str> = module.split('/').filter(|s| !s.is_empty()).collect();
        let parent = if is_dir_module || parent.is_empty() {
            parent[..parent.len().saturating_sub(1)].to_vec()
        } else {
            parent[..parent.len() - 1].to_vec()
        };
        for (prefix, base) in [("crate::", Vec::new()), ("super::", parent)] {
            for (at, _) in text.match_indices(prefix) {
                if at > 0 && text[..at].ends_with(|c: char| ident(c) || c == ':') {
                    continue;
                }
                let rest = &text[at + prefix.len()..];
                let path: String = rest.chars().take_while(|&c| ident(c) || c == ':').collect();
                let mut segments = base.clone();
                segments.extend(path.split("::").filter(|s| !s.is_empty() && *s != "*"));
                // A `use super::{a, b}` group names each.
                let group = rest[path.len()..].starts_with('{');
                let heads: Vec<Vec<&str>> = if group {
                    let inner = rest[path.len() + 1..].split('}').next().unwrap_or_default();
                    inner
                        .split(',')
                        .map(|item| {
                            let mut s = segments.clone();
                            s.extend(item.trim().split("::").next().filter(|h| !h.is_empty()));
                            s
                        })
                        .collect()
                } else {
                    vec![segments]
                };
                for h in heads {
                    if let Some(target) = resolve(&known, &h) {
                        if &target != module && !module.starts_with(&format!("{target}/")) {
                            edges.entry(module.clone()).or_default().insert(target);
                        }
                    }
                }
            }
        }
    }
    // Depth-first search for a cycle.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(2) => return None,
            Some(1) => {
                let from = path.iter().position(|p| p == m).unwrap_or(0);
                let mut cycle = path[from..].to_vec();
                cycle.push(m.to_string());
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for next in edges.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, edges, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in modules.keys() {
        if let Some(cycle) = visit(m, &edges, &mut state, &mut Vec::new()) {
            panic!(
                "modules depend on each other in a circle: {}",
                cycle.join(" -> ")
            );
        }
    }
    assert!(edges
        .get("app/task")
        .is_some_and(|e| e.contains("app/crawl")));
}
