//! Cleaned HTML: the content elements with only meaningful attributes, links made absolute.
//! Every node and every byte written is reported to the page's [`Meter`].

use super::meter::Meter;
use super::{absolute, Filter};
use scraper::node::Node;
use scraper::ElementRef;
use url::Url;

const KEPT_ATTRS: &[&str] = &["alt", "title", "colspan", "rowspan", "lang", "start"];
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

fn escape_into(out: &mut String, s: &str, attr: bool, meter: &Meter) {
    if !meter.add(s.len()) {
        return;
    }
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

/// What one serialisation walk needs.
struct Walk<'a> {
    filter: &'a Filter,
    base: &'a Url,
    meter: &'a Meter<'a>,
}

/// Serialises the content under `roots` (the body's children, or each included element).
/// When the meter stops the walk the result is partial: the caller checks the meter.
pub(crate) fn render(roots: &[ElementRef], filter: &Filter, base: &Url, meter: &Meter) -> String {
    let w = Walk {
        filter,
        base,
        meter,
    };
    let mut out = String::new();
    for root in roots {
        if filter.skips(root) {
            continue;
        }
        if matches!(root.value().name(), "body" | "html") {
            w.children(*root, &mut out);
        } else {
            w.element(*root, &mut out);
        }
    }
    out.trim().to_string()
}

impl Walk<'_> {
    fn children(&self, el: ElementRef, out: &mut String) {
        for child in el.children() {
            match child.value() {
                Node::Text(t) => escape_into(out, t, false, self.meter),
                Node::Element(_) => {
                    if let Some(c) = ElementRef::wrap(child) {
                        if !self.filter.skips(&c) {
                            self.element(c, out);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn element(&self, el: ElementRef, out: &mut String) {
        if !self.meter.step() {
            return;
        }
        let (base, meter) = (self.base, self.meter);
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
            escape_into(out, &value, true, meter);
            out.push('"');
        }
        out.push('>');
        if VOID.contains(&name) {
            return;
        }
        self.children(el, out);
        out.push_str("</");
        out.push_str(name);
        out.push('>');
    }
}
