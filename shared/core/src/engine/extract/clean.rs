//! Cleaned HTML: the content elements with only meaningful attributes, links made absolute.

use super::{absolute, Filter};
use scraper::node::Node;
use scraper::ElementRef;
use url::Url;

const KEPT_ATTRS: &[&str] = &["alt", "title", "colspan", "rowspan", "lang", "start"];
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

fn escape_into(out: &mut String, s: &str, attr: bool) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attr => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
}

/// Serialises the content under `roots` (the body's children, or each included element).
pub(crate) fn render(roots: &[ElementRef], filter: &Filter, base: &Url) -> String {
    let mut out = String::new();
    for root in roots {
        if filter.skips(root) {
            continue;
        }
        if matches!(root.value().name(), "body" | "html") {
            children(*root, filter, base, &mut out);
        } else {
            element(*root, filter, base, &mut out);
        }
    }
    out.trim().to_string()
}

fn children(el: ElementRef, filter: &Filter, base: &Url, out: &mut String) {
    for child in el.children() {
        match child.value() {
            Node::Text(t) => escape_into(out, t, false),
            Node::Element(_) => {
                if let Some(c) = ElementRef::wrap(child) {
                    if !filter.skips(&c) {
                        element(c, filter, base, out);
                    }
                }
            }
            _ => {}
        }
    }
}

fn element(el: ElementRef, filter: &Filter, base: &Url, out: &mut String) {
    let v = el.value();
    let name = v.name();
    out.push('<');
    out.push_str(name);
    for (attr, value) in v.attrs() {
        let value = match attr {
            "href" | "src" => match absolute(base, value) {
                Some(u) => u.to_string(),
                None => continue,
            },
            a if KEPT_ATTRS.contains(&a) => value.to_string(),
            _ => continue,
        };
        out.push(' ');
        out.push_str(attr);
        out.push_str("=\"");
        escape_into(out, &value, true);
        out.push('"');
    }
    out.push('>');
    if VOID.contains(&name) {
        return;
    }
    children(el, filter, base, out);
    out.push_str("</");
    out.push_str(name);
    out.push('>');
}
