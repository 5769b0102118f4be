//! Parsing HTML within bounds. The tree's depth and node count are checked as it is built
//! (after every token on the [`simple`] path, between chunks of input on html5ever's) and the
//! budget's deadline along the way, so a page of 100,000 nested tags (whose parse would take
//! the tree builder quadratic time) or millions of tiny elements (whose tree would take
//! gigabytes) is given up after a few milliseconds of work. A tree that passes is at most
//! [`MAX_DEPTH`] deep, which every walk over it may rely on. Attributes are bounded too: an
//! element keeps at most [`MAX_ATTRIBUTES`], a tree at most [`MAX_TREE_ATTRIBUTES`] (the tree
//! builder copies a formatting element's attributes each time it reopens it, so a few kilobytes
//! of markup could otherwise make gigabytes of them).

mod bounded;
mod simple;

use super::budget::{Budget, Exceeded};
use bounded::Bounded;
use ego_tree::NodeId;
use html5ever::buffer_queue::BufferQueue;
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{Token, TokenSink, TokenSinkResult, Tokenizer};
use html5ever::tree_builder::{TreeBuilder, TreeSink};
use html5ever::TokenizerResult;
use scraper::Html;

/// Deepest element nesting processed (browsers stop nesting at about this depth too).
pub const MAX_DEPTH: usize = 512;
/// Most nodes (elements, text runs, comments) in one page's tree: about 65 MB of tree.
pub const MAX_NODES: usize = 500_000;
/// Most attributes in one page's tree, all elements together: about 50 MB of them.
pub const MAX_TREE_ATTRIBUTES: usize = 1_000_000;
/// Attributes an element keeps: its first ones, a repeated name counted once. The tree builder
/// copies a tag's attributes each time it reopens a formatting element, and adding those of a
/// second `<body>` to the first costs a sorted insert each, so a tag of 100,000 attributes would
/// cost seconds between two looks at the deadline. (html5ever's tokenizer still compares each of
/// a tag's attributes with all before it; a chunk holds a few thousand, so the deadline checked
/// between chunks stops that within a fraction of a second.)
pub const MAX_ATTRIBUTES: usize = 256;
/// Bytes handed to the tree builder between two checks.
const CHUNK: usize = 16 * 1024;

fn too_deep() -> Exceeded {
    Exceeded::TooComplex(format!(
        "the HTML nests elements deeper than {MAX_DEPTH} levels"
    ))
}

fn too_many() -> Exceeded {
    Exceeded::TooComplex(format!("the HTML has more than {MAX_NODES} nodes"))
}

fn too_many_attributes() -> Exceeded {
    Exceeded::TooComplex(format!(
        "the HTML's elements have more than {MAX_TREE_ATTRIBUTES} attributes"
    ))
}

/// Parses a whole document within the bounds and the budget. Well-formed markup is tokenized
/// by [`simple`], and the tree of a well-nested page built directly from its tokens; any other
/// page is tokenized by html5ever, or its tree built by html5ever's tree builder. The tree is
/// the same either way.
pub fn parse(source: &str, budget: &Budget) -> Result<Html, Exceeded> {
    parse_by(source, budget).map(|(html, _)| html)
}

/// Which way a page was parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parser {
    /// The simple tokenizer, the tree built directly.
    Direct,
    /// The simple tokenizer, html5ever's tree builder.
    Simple,
    /// html5ever's tokenizer and tree builder.
    Html5ever,
}

/// [`parse`], and which way it went (for the tests and the benchmark of real pages).
pub fn parse_by(source: &str, budget: &Budget) -> Result<(Html, Parser), Exceeded> {
    match simple::parse(source, budget)? {
        Some(parsed) => Ok(parsed),
        None => Ok((parse_any(source, budget)?, Parser::Html5ever)),
    }
}

/// A tree as text, one line a node: every kind, name (with namespace), attribute (with prefix
/// and namespace), text, comment and doctype field, and the quirks mode; two trees are the same
/// when their outlines are.
pub fn outline(html: &Html) -> String {
    use scraper::node::Node;
    let mut out = format!("{:?}\n", html.quirks_mode);
    for edge in html.tree.root().traverse() {
        let ego_tree::iter::Edge::Open(node) = edge else {
            out.push_str("/\n");
            continue;
        };
        let line = match node.value() {
            Node::Document => "#document".to_string(),
            Node::Fragment => "#fragment".to_string(),
            Node::Doctype(d) => format!(
                "doctype {:?} {:?} {:?}",
                d.name(),
                d.public_id(),
                d.system_id()
            ),
            Node::Comment(c) => format!("comment {:?}", &**c),
            Node::Text(t) => format!("text {:?}", &**t),
            Node::Element(e) => {
                let mut attrs: Vec<String> = e
                    .attrs
                    .iter()
                    .map(|(k, v)| format!("{:?}:{:?}:{}={:?}", k.prefix, k.ns, k.local, &**v))
                    .collect();
                attrs.sort();
                format!("<{:?}:{} {}>", e.name.ns, e.name.local, attrs.join(" "))
            }
            Node::ProcessingInstruction(p) => format!("pi {:?}", &**p),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Parses any document with html5ever's tokenizer, fed in chunks with the checks between them.
fn parse_any(source: &str, budget: &Budget) -> Result<Html, Exceeded> {
    let tokenizer = Tokenizer::new(
        Capped(TreeBuilder::new(
            Bounded::new(source.len()),
            Default::default(),
        )),
        Default::default(),
    );
    let input = BufferQueue::default();
    let mut rest = source;
    while !rest.is_empty() {
        let mut end = rest.len().min(CHUNK);
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        input.push_back(StrTendril::from_slice(&rest[..end]));
        while let TokenizerResult::Script(_) = tokenizer.feed(&input) {}
        rest = &rest[end..];
        tokenizer.sink.0.sink.within_bounds()?;
        budget.check()?;
    }
    tokenizer.end();
    let moved = tokenizer.sink.0.sink.moved();
    checked(tokenizer.sink.0.sink.finish(), moved)
}

/// html5ever's tree builder behind a tokenizer, handed at most [`MAX_ATTRIBUTES`] attributes a
/// tag (the tokenizer has already dropped repeated names), as the [`simple`] tokenizer does.
struct Capped(TreeBuilder<NodeId, Bounded>);

impl TokenSink for Capped {
    type Handle = NodeId;

    fn process_token(&self, mut token: Token, line_number: u64) -> TokenSinkResult<NodeId> {
        if let Token::TagToken(tag) = &mut token {
            tag.attrs.truncate(MAX_ATTRIBUTES);
        }
        self.0.process_token(token, line_number)
    }

    fn end(&self) {
        self.0.end()
    }

    fn adjusted_current_node_present_but_not_in_html_namespace(&self) -> bool {
        self.0
            .adjusted_current_node_present_but_not_in_html_namespace()
    }
}

/// A finished tree, measured once more if the parser moved nodes: the depths were counted as
/// nodes arrived, and misnested markup can move subtrees afterwards.
fn checked(html: Html, moved: bool) -> Result<Html, Exceeded> {
    if moved && depth_of(&html) > MAX_DEPTH {
        return Err(too_deep());
    }
    Ok(html)
}

/// The depth of the deepest node of a tree, found without recursion.
fn depth_of(html: &Html) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for edge in html.tree.root().traverse() {
        match edge {
            ego_tree::iter::Edge::Open(_) => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ego_tree::iter::Edge::Close(_) => depth = depth.saturating_sub(1),
        }
    }
    deepest.saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn nested(open: &str, n: usize) -> String {
        format!("<html><body>{}x", open.repeat(n))
    }

    #[test]
    fn ordinary_pages_parse_as_before() {
        let src = "<html><head><title>T</title></head><body><p>a<b>b</b></p><table><tr><td>c\
                   </table></body></html>";
        let bounded = parse(src, &Budget::unlimited()).unwrap();
        assert_eq!(bounded.html(), Html::parse_document(src).html());
        let deep = nested("<div>", MAX_DEPTH - 10);
        assert!(parse(&deep, &Budget::unlimited()).is_ok());
    }

    #[test]
    fn deep_nesting_is_refused_quickly() {
        for open in [
            "<div>",
            "<span>",
            "<b>",
            "<blockquote>",
            "<ul><li>",
            "<table><tr><td>",
        ] {
            for n in [20_000, 100_000] {
                let t = Instant::now();
                let r = parse(&nested(open, n), &Budget::unlimited());
                assert!(
                    matches!(r, Err(Exceeded::TooComplex(_))),
                    "{open} x {n} was not refused"
                );
                assert!(
                    t.elapsed() < Duration::from_secs(2),
                    "{open} x {n}: {:?}",
                    t.elapsed()
                );
            }
        }
    }

    #[test]
    fn too_many_nodes_are_refused() {
        let src = format!("<html><body>{}", "<i></i>".repeat(MAX_NODES + 10));
        assert!(matches!(
            parse(&src, &Budget::unlimited()),
            Err(Exceeded::TooComplex(_))
        ));
    }

    #[test]
    fn parse_errors_are_not_kept() {
        // Stray end tags: one parse error each and no node, on both tokenizers' paths.
        for src in [
            format!("<html><body>{}", "</x>".repeat(100_000)),
            format!("<html><body>\0{}", "</x>".repeat(100_000)),
        ] {
            let html = parse(&src, &Budget::unlimited()).unwrap();
            assert!(html.errors.is_empty(), "{} errors kept", html.errors.len());
        }
    }

    /// `n` attributes of distinct names: `a0 a1 ...`.
    fn attributes(n: usize) -> String {
        (0..n).map(|i| format!(" a{i}")).collect()
    }

    #[test]
    fn many_attributes_cost_no_more_than_their_cap() {
        // A tag of 100,000 attributes, on an element and on a second `<body>`: capped, and
        // quickly (uncapped, each is compared with all before it, then sorted in one by one).
        let many = attributes(100_000);
        for (src, element) in [
            (format!("<html><body><p{many}>x"), "p"),
            (format!("<html><body b=1><body{many}>x"), "body"),
        ] {
            let t = Instant::now();
            let html = parse(&src, &Budget::unlimited()).unwrap();
            assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
            let selector = scraper::Selector::parse(element).unwrap();
            let e = html.select(&selector).next().unwrap().value();
            assert_eq!(e.attrs().count(), MAX_ATTRIBUTES, "<{element}>");
            assert_eq!(e.attr("a0"), Some(""));
        }
        // A formatting element reopened in every paragraph copies its attributes each time:
        // 100,000 copies of 256 would be 25.6 million attributes (gigabytes), on either path.
        let reopened = format!(
            "<html><body><p><b{}></p>{}",
            attributes(MAX_ATTRIBUTES),
            "<p>x".repeat(100_000)
        );
        for src in [reopened.clone(), format!("\0{reopened}")] {
            let t = Instant::now();
            assert!(matches!(
                parse(&src, &Budget::unlimited()),
                Err(Exceeded::TooComplex(m)) if m.contains("attributes")
            ));
            assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        }
    }

    #[test]
    fn the_deadline_stops_a_parse() {
        let budget = Budget::new(Duration::ZERO);
        let src = format!("<html><body>{}", "<p>text ".repeat(10_000));
        assert!(matches!(parse(&src, &budget), Err(Exceeded::Time(_))));
    }
}
