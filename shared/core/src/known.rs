//! The URLs each job has recorded, as far as this process has seen them (a helper both store
//! adapters use). A recorded URL stays recorded, so the cache is never wrong, only incomplete:
//! it spares a page's claim the reads of the links the process has met before (a crawled site
//! links the same pages from nearly every page).

use crate::ports::NewNode;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// A URL's digest: the first 16 bytes of its SHA-256.
pub fn url_digest(url: &str) -> [u8; 16] {
    let d = Sha256::digest(url.as_bytes());
    let mut out = [0; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// Most URLs kept for all jobs together (16 bytes each): past it, the cache starts afresh.
const MAX_KNOWN: usize = 500_000;

/// The per-process cache of recorded URLs, by job (a key of the adapter's choosing).
#[derive(Default)]
pub struct KnownUrls {
    inner: Mutex<Known>,
}

#[derive(Default)]
struct Known {
    jobs: HashMap<String, HashSet<[u8; 16]>>,
    total: usize,
}

impl KnownUrls {
    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the job `pk` is known to have recorded the URL of `digest`.
    #[cfg(test)]
    fn contains(&self, pk: &str, digest: &[u8; 16]) -> bool {
        self.lock().jobs.get(pk).is_some_and(|s| s.contains(digest))
    }

    /// The nodes of `nodes` whose URL the job `pk` is not known to have recorded, each with
    /// its URL's digest (one look at the cache for them all).
    pub fn unknown<'a>(&self, pk: &str, nodes: &'a [NewNode]) -> Vec<(&'a NewNode, [u8; 16])> {
        let known = self.lock();
        let set = known.jobs.get(pk);
        nodes
            .iter()
            .map(|n| (n, url_digest(&n.url)))
            .filter(|(_, d)| !set.is_some_and(|s| s.contains(d)))
            .collect()
    }

    /// Notes that the job `pk` has recorded the URLs of `digests`.
    pub fn insert(&self, pk: &str, digests: impl IntoIterator<Item = [u8; 16]>) {
        let mut known = self.lock();
        if known.total >= MAX_KNOWN {
            known.jobs.clear();
            known.total = 0;
        }
        let set = known.jobs.entry(pk.to_string()).or_default();
        let before = set.len();
        set.extend(digests);
        let added = set.len() - before;
        known.total += added;
    }

    /// Forgets a job that ended.
    pub fn forget(&self, pk: &str) {
        let mut known = self.lock();
        if let Some(set) = known.jobs.remove(pk) {
            known.total -= set.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_per_job_and_stays_bounded() {
        let k = KnownUrls::default();
        k.insert("a", [[1; 16], [2; 16]]);
        assert!(k.contains("a", &[1; 16]));
        assert!(!k.contains("b", &[1; 16]));
        assert!(!k.contains("a", &[3; 16]));
        let nodes: Vec<NewNode> = ["https://e.com/x", "https://e.com/y"]
            .into_iter()
            .map(|u| NewNode {
                url: u.into(),
                depth: 1,
                skip: None,
            })
            .collect();
        k.insert("a", [url_digest("https://e.com/x")]);
        let unknown: Vec<&str> = k
            .unknown("a", &nodes)
            .iter()
            .map(|(n, _)| n.url.as_str())
            .collect();
        assert_eq!(unknown, ["https://e.com/y"]);
        assert_eq!(k.unknown("b", &nodes).len(), 2);
        k.forget("a");
        assert!(!k.contains("a", &[1; 16]));
        assert_eq!(k.unknown("a", &nodes).len(), 2);
        for i in 0..(MAX_KNOWN / 1000 + 1) {
            let digests = (0..1000u32).map(|j| {
                let mut d = [0u8; 16];
                d[..4].copy_from_slice(&(i as u32).to_be_bytes());
                d[4..8].copy_from_slice(&j.to_be_bytes());
                d
            });
            k.insert("big", digests);
        }
        assert!(k.lock().total <= MAX_KNOWN);
    }
}
