//! URL normalisation and the crawl's scope rules (SECURITY.md V4).

use crate::domain::request::{CrawlRequest, REGEX_SIZE_LIMIT};
use crate::domain::validate::MAX_URL_BYTES;
use crate::ports::SkipReason;
use regex::{Regex, RegexBuilder};
use url::Url;

/// The longest path a crawl follows; longer ones are traps more often than pages.
pub const MAX_PATH_BYTES: usize = 1024;

/// The form of a URL under which a job records it once: no fragment, no empty query, and the
/// `url` crate's canonical scheme, host, default port and percent-encoding.
pub fn normalise(u: &Url) -> Url {
    let mut n = u.clone();
    n.set_fragment(None);
    if n.query() == Some("") {
        n.set_query(None);
    }
    n
}

/// Which discovered URLs a crawl follows.
pub struct Scope {
    base_host: String,
    allow_subdomains: bool,
    allow_external: bool,
    include: Vec<Regex>,
    exclude: Vec<Regex>,
    include_documents: bool,
}

/// Whether a URL's path names a document (a PDF or a Word document) rather than a page.
pub fn is_document_path(path: &str) -> bool {
    path.rsplit_once('.')
        .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case("pdf"))
        || super::docx::is_docx_path(path)
}

fn compile(patterns: &[String]) -> Vec<Regex> {
    // Patterns were compiled once at validation; one that fails now is dropped.
    patterns
        .iter()
        .filter_map(|p| {
            RegexBuilder::new(p)
                .size_limit(REGEX_SIZE_LIMIT)
                .build()
                .ok()
        })
        .collect()
}

impl Scope {
    pub fn new(req: &CrawlRequest, root: &Url) -> Self {
        let host = root.host_str().unwrap_or_default().to_ascii_lowercase();
        let base_host = host.strip_prefix("www.").unwrap_or(&host).to_string();
        Scope {
            base_host,
            allow_subdomains: req.allow_subdomains,
            allow_external: req.allow_external,
            include: compile(&req.include_paths),
            exclude: compile(&req.exclude_paths),
            include_documents: req.include_documents,
        }
    }

    fn host_in_scope(&self, u: &Url) -> bool {
        let host = u.host_str().unwrap_or_default();
        let bare = host.strip_prefix("www.").unwrap_or(host);
        if bare == self.base_host {
            return true;
        }
        self.allow_subdomains
            && host
                .strip_suffix(self.base_host.as_str())
                .is_some_and(|rest| rest.ends_with('.'))
    }

    /// Why a discovered URL is not followed, or `None` when it is.
    pub fn skip_reason(&self, u: &Url) -> Option<SkipReason> {
        if !self.allow_external && !self.host_in_scope(u) {
            return Some(SkipReason::External);
        }
        let path = u.path();
        if u.as_str().len() > MAX_URL_BYTES || path.len() > MAX_PATH_BYTES {
            return Some(SkipReason::Filtered);
        }
        if !self.include.is_empty() && !self.include.iter().any(|r| r.is_match(path)) {
            return Some(SkipReason::Filtered);
        }
        if self.exclude.iter().any(|r| r.is_match(path)) {
            return Some(SkipReason::Filtered);
        }
        if !self.include_documents && is_document_path(path) {
            return Some(SkipReason::Filtered);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crawl(body: &str) -> CrawlRequest {
        CrawlRequest::parse(body.as_bytes()).unwrap()
    }

    #[test]
    fn normalises_to_one_form() {
        let a = normalise(&Url::parse("HTTP://Example.COM:80/a#frag").unwrap());
        let b = normalise(&Url::parse("http://example.com/a?").unwrap());
        assert_eq!(a.as_str(), "http://example.com/a");
        assert_eq!(a, b);
    }

    #[test]
    fn scope_rules() {
        let req = crawl(
            r#"{"url":"https://www.example.com/","include_paths":["^/docs"],"exclude_paths":["/private"]}"#,
        );
        let root = Url::parse(&req.url).unwrap();
        let s = Scope::new(&req, &root);
        let check = |u: &str| s.skip_reason(&Url::parse(u).unwrap());
        assert_eq!(check("https://example.com/docs/a"), None);
        assert_eq!(check("https://www.example.com/docs/b"), None);
        assert_eq!(
            check("https://www.example.com/blog"),
            Some(SkipReason::Filtered)
        );
        assert_eq!(
            check("https://example.com/docs/private/x"),
            Some(SkipReason::Filtered)
        );
        assert_eq!(
            check("https://api.example.com/docs"),
            Some(SkipReason::External)
        );
        assert_eq!(check("https://other.org/docs"), Some(SkipReason::External));

        let req = crawl(r#"{"url":"https://example.com/","allow_subdomains":true}"#);
        let s = Scope::new(&req, &Url::parse(&req.url).unwrap());
        let check = |u: &str| s.skip_reason(&Url::parse(u).unwrap());
        assert_eq!(check("https://api.example.com/x"), None);
        assert_eq!(
            check("https://badexample.com/x"),
            Some(SkipReason::External)
        );
    }

    #[test]
    fn long_paths_are_traps() {
        let req = crawl(r#"{"url":"https://example.com/"}"#);
        let s = Scope::new(&req, &Url::parse(&req.url).unwrap());
        let long = format!("https://example.com/{}", "a/b/".repeat(300));
        assert_eq!(
            s.skip_reason(&Url::parse(&long).unwrap()),
            Some(SkipReason::Filtered)
        );
    }
}
