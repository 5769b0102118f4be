//! Extraction from one parsed HTML document: Markdown, plain text, cleaned HTML, absolute
//! links and metadata. The document is parsed once (within the bounds of [`super::html`]);
//! every format is a walk over that one tree, metered by one [`Meter`] so that what a page
//! makes its extraction build (and the time it takes) stays bounded whatever its shape.

mod clean;
mod markdown;
mod meter;
mod schema;

use super::budget::{Budget, Exceeded};
use crate::domain::SelectorSchema;
use crate::stages::{self, Stage};
use html5ever::{local_name, ns, LocalName};
use meter::Meter;
use scraper::node::Element;
use scraper::{ElementRef, Html, Selector};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use url::Url;

pub use meter::MAX_OUTPUT;
pub use schema::MAX_MATCHES;

/// Distinct links taken from one page at most (a crawl never needs more: its `limit` is at most
/// as many), so what a page's links cost downstream (scope, robots, claims) stays bounded.
pub const MAX_LINKS: usize = 10_000;

/// What to extract and which parts of the page count.
#[derive(Default)]
pub struct ExtractOptions {
    pub only_main_content: bool,
    pub include_selectors: Vec<Selector>,
    pub exclude_selectors: Vec<Selector>,
    pub markdown: bool,
    pub text: bool,
    pub html: bool,
    /// What the page declares (its `meta` tags, favicon and JSON-LD) read: only when the
    /// metadata is asked for. Title, description, language and canonical URL always are.
    pub declared: bool,
    /// A schema of selectors to read the page with.
    pub schema: Option<SelectorSchema>,
}

impl ExtractOptions {
    /// Compiles selectors (already validated with the request; an invalid one is dropped).
    pub fn with_selectors(mut self, include: &[String], exclude: &[String]) -> Self {
        let compile = |list: &[String]| -> Vec<Selector> {
            list.iter()
                .filter_map(|s| Selector::parse(s).ok())
                .collect()
        };
        self.include_selectors = compile(include);
        self.exclude_selectors = compile(exclude);
        self
    }
}

/// Everything extracted from one page.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Extracted {
    pub title: Option<String>,
    pub description: Option<String>,
    pub language: Option<String>,
    pub canonical_url: Option<String>,
    /// Absolute http(s) links of the whole page, without fragments, each once, in page order;
    /// the first [`MAX_LINKS`].
    pub links: Vec<Url>,
    pub markdown: Option<String>,
    pub text: Option<String>,
    pub html: Option<String>,
    /// What the selector schema read.
    pub json: Option<Value>,
    /// What the page declares besides (OpenGraph, Twitter cards, author, dates, keywords,
    /// favicon, JSON-LD), by the names the document's metadata uses.
    pub declared: Map<String, Value>,
    /// JSON-LD blocks that are not valid JSON (skipped).
    pub invalid_json_ld: usize,
}

/// Elements whose content is never part of the readable page (names as interned atoms: every
/// element is checked against them, and an atom compares as one integer).
const NEVER_CONTENT: &[LocalName] = &[
    local_name!("script"),
    local_name!("style"),
    local_name!("noscript"),
    local_name!("template"),
    local_name!("head"),
    local_name!("svg"),
    local_name!("iframe"),
    local_name!("object"),
    local_name!("embed"),
    local_name!("canvas"),
    local_name!("select"),
    local_name!("button"),
    local_name!("input"),
    local_name!("textarea"),
    local_name!("link"),
    local_name!("meta"),
    local_name!("dialog"),
];
/// Page chrome that `only_main_content` drops.
const CHROME: &[LocalName] = &[
    local_name!("nav"),
    local_name!("header"),
    local_name!("footer"),
    local_name!("aside"),
];
const CHROME_ROLES: &[&str] = &["navigation", "banner", "contentinfo", "complementary"];

/// Decides which elements are part of the content.
pub(crate) struct Filter {
    excluded: HashSet<ego_tree::NodeId>,
    only_main_content: bool,
}

impl Filter {
    /// Whether an element and everything under it is left out.
    pub(crate) fn skips(&self, el: &ElementRef) -> bool {
        let v = el.value();
        let name = &v.name.local;
        if NEVER_CONTENT.contains(name) || attr(v, local_name!("hidden")).is_some() {
            return true;
        }
        if self.only_main_content
            && (CHROME.contains(name)
                || attr(v, local_name!("role")).is_some_and(|r| CHROME_ROLES.contains(&r)))
        {
            return true;
        }
        self.excluded.contains(&el.id())
    }
}

/// The value of an element's attribute (without namespace) named by an atom: a look through
/// its few attributes, where scraper's `attr` interns the name it is given first.
pub(crate) fn attr(e: &Element, name: LocalName) -> Option<&str> {
    e.attrs
        .iter()
        .find(|(n, _)| n.local == name && n.ns == ns!() && n.prefix.is_none())
        .map(|(_, v)| &**v)
}

/// Extracts what `opts` asks for from an HTML document fetched from `url`, within `budget`.
pub fn extract_html(
    source: &str,
    url: &Url,
    opts: &ExtractOptions,
    budget: &Budget,
) -> Result<Extracted, Exceeded> {
    let doc = super::html::parse(source, budget)?;
    let meter = Meter::new(budget);
    let links_in = stages::enter(Some(Stage::Links));
    let (resolver, mut out) = links_and_metadata(&doc, url, opts.declared, &meter);
    drop(links_in);
    meter.result()?;
    if let Some(s) = &opts.schema {
        out.json = Some(schema::run(&doc, s, &meter));
        meter.result()?;
    }
    let _rendering = stages::enter(Some(Stage::Markdown));

    if !(opts.markdown || opts.text || opts.html) {
        return Ok(out);
    }
    let excluded = opts
        .exclude_selectors
        .iter()
        .flat_map(|s| doc.select(s).map(|e| e.id()))
        .collect();
    let filter = Filter {
        excluded,
        only_main_content: opts.only_main_content,
    };
    let roots = content_roots(&doc, &opts.include_selectors);
    let modes = [
        (opts.markdown, markdown::Mode::Markdown),
        (opts.text, markdown::Mode::Text),
    ];
    for (wanted, mode) in modes {
        if wanted {
            let rendered = markdown::render(&roots, &filter, &resolver, mode, &meter);
            meter.result()?;
            match mode {
                markdown::Mode::Markdown => out.markdown = Some(rendered),
                markdown::Mode::Text => out.text = Some(rendered),
            }
        }
    }
    if opts.html {
        out.html = Some(clean::render(&roots, &filter, resolver.base(), &meter));
        meter.result()?;
    }
    Ok(out)
}

/// The elements whose content is extracted: the matches of `include` (outermost only), or the
/// body.
fn content_roots<'a>(doc: &'a Html, include: &[Selector]) -> Vec<ElementRef<'a>> {
    if include.is_empty() {
        let body = Selector::parse("body").ok();
        return match body.as_ref().and_then(|b| doc.select(b).next()) {
            Some(b) => vec![b],
            None => vec![doc.root_element()],
        };
    }
    let matched: HashSet<ego_tree::NodeId> = include
        .iter()
        .flat_map(|s| doc.select(s).map(|e| e.id()))
        .collect();
    // Document order, and a match inside another match is already covered by it.
    doc.root_element()
        .descendants()
        .filter(|n| matched.contains(&n.id()))
        .filter(|n| !n.ancestors().any(|a| matched.contains(&a.id())))
        .filter_map(ElementRef::wrap)
        .collect()
}

/// What one walk over the tree finds for the links and the metadata: for each, the first
/// element in document order that a CSS selector would match (`title`, `base[href]`,
/// `meta[name="description"]`, `link[rel="canonical"][href]`, ...), and every link's `href`.
#[derive(Default)]
struct Head<'a> {
    base: Option<&'a str>,
    title: Option<ElementRef<'a>>,
    /// The `content` of the first `meta` of each kind (which may have none).
    description: Option<Option<&'a str>>,
    og_title: Option<Option<&'a str>>,
    og_description: Option<Option<&'a str>>,
    canonical: Option<&'a str>,
    hrefs: Vec<&'a str>,
    /// Declared metadata: `(name, content)` of each `meta` the document's metadata names.
    declared: Vec<(String, &'a str)>,
    favicon: Option<&'a str>,
    json_ld: Vec<ElementRef<'a>>,
}

fn first<T>(slot: &mut Option<T>, value: Option<T>) {
    if slot.is_none() {
        *slot = value;
    }
}

fn scan(doc: &Html) -> Head<'_> {
    let mut head = Head::default();
    for el in doc
        .root_element()
        .descendants()
        .filter_map(ElementRef::wrap)
    {
        let v = el.value();
        let get = |name: LocalName| attr(v, name);
        match v.name() {
            "a" | "area" => head.hrefs.extend(get(local_name!("href"))),
            "title" if head.title.is_none() => head.title = Some(el),
            "base" => first(&mut head.base, get(local_name!("href"))),
            "meta" => {
                let content = get(local_name!("content"));
                if get(local_name!("name")) == Some("description") {
                    first(&mut head.description, Some(content));
                }
                match get(local_name!("property")) {
                    Some("og:title") => first(&mut head.og_title, Some(content)),
                    Some("og:description") => first(&mut head.og_description, Some(content)),
                    _ => {}
                }
                let key = get(local_name!("property"))
                    .or(get(local_name!("name")))
                    .and_then(declared_name);
                if let (Some(key), Some(content)) = (key, content) {
                    head.declared.push((key, content));
                }
            }
            "script" if get(local_name!("type")).is_some_and(is_json_ld) => head.json_ld.push(el),
            "link" => {
                // `rel` compares without case on an HTML element, as in a selector.
                let html = v.name.ns == html5ever::ns!(html);
                let canonical = get(local_name!("rel")).is_some_and(|r| {
                    r == "canonical" || (html && r.eq_ignore_ascii_case("canonical"))
                });
                if canonical {
                    first(&mut head.canonical, get(local_name!("href")));
                }
                let icon = get(local_name!("rel")).is_some_and(|r| {
                    r.split_ascii_whitespace()
                        .any(|w| w.eq_ignore_ascii_case("icon"))
                });
                if icon {
                    first(&mut head.favicon, get(local_name!("href")));
                }
            }
            _ => {}
        }
    }
    head
}

/// The name in the document's metadata of a `meta` tag's `property` or `name`: OpenGraph
/// (`og:image` -> `og_image`) and Twitter card fields, `author`, `keywords`, and an article's
/// publication and modification times.
fn declared_name(name: &str) -> Option<String> {
    let lower = name.trim().to_ascii_lowercase();
    let key = match lower.as_str() {
        "author" | "article:author" => "author".to_string(),
        "keywords" => "keywords".to_string(),
        "article:published_time" => "published_time".to_string(),
        "article:modified_time" => "modified_time".to_string(),
        n if n.starts_with("og:") || n.starts_with("twitter:") => n.replace(':', "_"),
        _ => return None,
    };
    (key.len() <= 64).then_some(key)
}

fn is_json_ld(t: &str) -> bool {
    t.split(';')
        .next()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/ld+json"))
}

/// JSON-LD blocks read at most, and the largest one read.
const MAX_JSON_LD: usize = 20;
const MAX_JSON_LD_BYTES: usize = 1024 * 1024;

/// What the page declares: the first of each `meta` by its name, keywords as a list, the
/// favicon's absolute URL, and the JSON-LD blocks that parse (and how many did not).
fn declared(head: &Head, base: &Url, meter: &Meter) -> (Map<String, Value>, usize) {
    let mut out = Map::new();
    for (key, content) in &head.declared {
        if out.contains_key(key) || !meter.add(content.len()) {
            continue;
        }
        let value = if key == "keywords" {
            let words: Vec<&str> = content
                .split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .collect();
            Value::from(words)
        } else {
            match non_empty(Some(content)) {
                Some(v) => Value::String(v),
                None => continue,
            }
        };
        out.insert(key.clone(), value);
    }
    if let Some(icon) = head.favicon.and_then(|h| absolute(base, h)) {
        out.insert("favicon".into(), Value::String(icon.into()));
    }
    let mut blocks = Vec::new();
    let mut invalid = 0;
    for el in head.json_ld.iter().take(MAX_JSON_LD) {
        let text: String = el.text().collect();
        if text.len() > MAX_JSON_LD_BYTES || !meter.add(text.len()) {
            invalid += 1;
            continue;
        }
        match serde_json::from_str::<Value>(text.trim()) {
            Ok(v) => blocks.push(v),
            Err(_) => invalid += 1,
        }
    }
    if !blocks.is_empty() {
        out.insert("json_ld".into(), Value::Array(blocks));
    }
    (out, invalid)
}

/// Resolves a link against the base; only http(s), without fragment.
pub(crate) fn absolute(base: &Url, href: &str) -> Option<Url> {
    let href = href.trim();
    // A fragment of this page (a third of a documentation page's links) is the page itself.
    let mut u = if href.starts_with('#') {
        base.clone()
    } else {
        base.join(href).ok()?
    };
    if !matches!(u.scheme(), "http" | "https") {
        return None;
    }
    u.set_fragment(None);
    Some(u)
}

/// The hasher of a page's maps of links: seeded at random like the standard one, and quicker
/// on short strings than its SipHash.
type Seeded = foldhash::quality::RandomState;

/// A page's base URL and the `href`s it has resolved against it (its first [`MAX_LINKS`]
/// distinct ones): the links are resolved for the page's links and written again in its
/// Markdown.
pub(crate) struct Resolver<'d> {
    base: Url,
    known: HashMap<&'d str, Option<Url>, Seeded>,
}

impl Resolver<'_> {
    pub(crate) fn base(&self) -> &Url {
        &self.base
    }

    /// `href` made [`absolute`] against the base (looked up when it was already).
    pub(crate) fn resolve(&self, href: &str) -> Option<Cow<'_, Url>> {
        match self.known.get(href) {
            Some(known) => known.as_ref().map(Cow::Borrowed),
            None => absolute(&self.base, href).map(Cow::Owned),
        }
    }
}

/// The distinct links of `hrefs`, in order, resolved by `resolver` (which keeps them).
fn links<'d>(hrefs: &[&'d str], resolver: &mut Resolver<'d>, meter: &Meter) -> Vec<Url> {
    let mut seen = HashSet::with_hasher(Seeded::default());
    let mut out = Vec::new();
    for href in hrefs {
        if out.len() >= MAX_LINKS || !meter.step() {
            break;
        }
        // A repeated `href` resolves as it did the first time: to nothing, or a link taken.
        // The first MAX_LINKS distinct ones are kept (a page of 500,000 `#n` hrefs would
        // otherwise keep 500,000 copies of its own URL); later ones resolve each time.
        let room = resolver.known.len() < MAX_LINKS;
        let Entry::Vacant(slot) = resolver.known.entry(*href) else {
            continue;
        };
        let resolved = absolute(&resolver.base, href);
        if room {
            slot.insert(resolved.clone());
        }
        let Some(u) = resolved else {
            continue;
        };
        if !seen.contains(u.as_str()) && meter.add(u.as_str().len()) {
            seen.insert(u.as_str().to_string());
            out.push(u);
        }
    }
    out
}

fn non_empty(s: Option<&str>) -> Option<String> {
    let t = markdown::collapsed([s?]);
    (!t.is_empty()).then_some(t)
}

/// The base URL (with the links resolved against it), and the links and the metadata of a
/// page (what it declares only if `declared`), from one walk over its tree.
fn links_and_metadata<'d>(
    doc: &'d Html,
    url: &Url,
    declared_too: bool,
    meter: &Meter,
) -> (Resolver<'d>, Extracted) {
    let head = scan(doc);
    let base = head
        .base
        .and_then(|h| url.join(h).ok())
        .unwrap_or_else(|| url.clone());
    let (declared, invalid_json_ld) = if declared_too {
        declared(&head, &base, meter)
    } else {
        (Map::new(), 0)
    };
    let mut resolver = Resolver {
        base,
        known: HashMap::with_capacity_and_hasher(
            head.hrefs.len().min(MAX_LINKS),
            Seeded::default(),
        ),
    };
    let links = links(&head.hrefs, &mut resolver, meter);
    let base = &resolver.base;
    let out = Extracted {
        declared,
        invalid_json_ld,
        links,
        title: head
            .title
            .and_then(|t| non_empty(Some(&t.text().collect::<String>())))
            .or_else(|| non_empty(head.og_title.flatten())),
        description: non_empty(head.description.flatten())
            .or_else(|| non_empty(head.og_description.flatten())),
        language: non_empty(doc.root_element().value().attr("lang")),
        canonical_url: head
            .canonical
            .and_then(|h| absolute(base, h))
            .map(String::from),
        ..Extracted::default()
    };
    (resolver, out)
}

#[cfg(test)]
mod tests;
