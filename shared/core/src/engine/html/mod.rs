//! Parsing HTML within bounds. The tree's depth and node count are checked as it is built
//! (after every token on the [`simple`] path, between chunks of input on html5ever's) and the
//! budget's deadline along the way, so a page of 100,000 nested tags (whose parse would take
//! the tree builder quadratic time) or millions of tiny elements (whose tree would take
//! gigabytes) is given up after a few milliseconds of work. A tree that passes is at most
//! [`MAX_DEPTH`] deep, which every walk over it may rely on.

mod bounded;
mod simple;

use super::budget::{Budget, Exceeded};
use bounded::Bounded;
use html5ever::tendril::{StrTendril, TendrilSink};
use scraper::Html;

/// Deepest element nesting processed (browsers stop nesting at about this depth too).
pub const MAX_DEPTH: usize = 512;
/// Most nodes (elements, text runs, comments) in one page's tree: about 65 MB of tree.
pub const MAX_NODES: usize = 500_000;
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

/// Parses a whole document within the bounds and the budget. Well-formed markup is tokenized
/// by [`simple`]; a page it does not take is tokenized by html5ever. Either way html5ever's tree
/// builder builds the tree, from the same tokens, so the tree is the same.
pub fn parse(source: &str, budget: &Budget) -> Result<Html, Exceeded> {
    match simple::parse(source, budget)? {
        Some(html) => Ok(html),
        None => parse_any(source, budget),
    }
}

/// Parses any document with html5ever's tokenizer, fed in chunks with the checks between them.
fn parse_any(source: &str, budget: &Budget) -> Result<Html, Exceeded> {
    let mut parser = html5ever::parse_document(Bounded::new(), Default::default());
    let mut rest = source;
    while !rest.is_empty() {
        let mut end = rest.len().min(CHUNK);
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        parser.process(StrTendril::from_slice(&rest[..end]));
        rest = &rest[end..];
        parser.tokenizer.sink.sink.within_bounds()?;
        budget.check()?;
    }
    let moved = parser.tokenizer.sink.sink.moved();
    checked(parser.finish(), moved)
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

    #[test]
    fn the_deadline_stops_a_parse() {
        let budget = Budget::new(Duration::ZERO);
        let src = format!("<html><body>{}", "<p>text ".repeat(10_000));
        assert!(matches!(parse(&src, &budget), Err(Exceeded::Time(_))));
    }
}
