//! HTML to GitHub-flavoured Markdown, and to plain text, over an already parsed tree. The
//! walk recurses at most as deep as the tree (which parsing bounds), and reports every node
//! and every string it builds to the page's [`Meter`].

use super::meter::Meter;
use super::{attr, Filter, Resolver};
use html5ever::local_name;
use scraper::node::Node;
use scraper::ElementRef;
use std::borrow::Cow;
use url::Url;

/// Markdown, or the same structure as plain text.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Markdown,
    Text,
}

struct Renderer<'a> {
    filter: &'a Filter,
    links: &'a Resolver<'a>,
    md: bool,
    meter: &'a Meter<'a>,
}

const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "body",
    "center",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hgroup",
    "hr",
    "html",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "ul",
];

fn is_block(name: &str) -> bool {
    BLOCKS.contains(&name)
}

/// Renders the content under `roots` as Markdown or text. When the meter stops the walk, what
/// is returned is partial: the caller checks the meter.
pub(crate) fn render(
    roots: &[ElementRef],
    filter: &Filter,
    links: &Resolver,
    mode: Mode,
    meter: &Meter,
) -> String {
    let r = Renderer {
        filter,
        links,
        md: mode == Mode::Markdown,
        meter,
    };
    let mut blocks = Vec::new();
    for root in roots {
        if !filter.skips(root) {
            r.block(*root, &mut blocks);
        }
    }
    blocks.join("\n\n")
}

/// `texts` one after another, each run of white space made one space, none at the ends.
pub(super) fn collapsed<'t>(texts: impl IntoIterator<Item = &'t str>) -> String {
    let mut out = String::new();
    let mut gap = false;
    for text in texts {
        for (i, word) in text.split(char::is_whitespace).enumerate() {
            // Every piece after a text's first follows white space.
            gap |= i > 0;
            if word.is_empty() {
                continue;
            }
            if gap && !out.is_empty() {
                out.push(' ');
            }
            gap = false;
            out.push_str(word);
        }
    }
    out
}

/// The characters of Markdown syntax that text always escapes (`_` and `&` only where they
/// would be read as syntax).
const SYNTAX: &[u8] = b"\\*`[]<|~";

/// Whether `c` (after `prev`, before `rest`) must be escaped in Markdown text: the characters
/// of inline syntax, `<` (raw HTML), `&` that would start an entity, and `|` (a table row).
fn escapes(prev: Option<char>, c: char, rest: &str) -> bool {
    match c {
        _ if u8::try_from(c).is_ok_and(|b| SYNTAX.contains(&b)) => true,
        // An underscore inside a word never starts emphasis in GFM.
        '_' => {
            let inside = prev.is_some_and(char::is_alphanumeric)
                && rest.chars().next().is_some_and(char::is_alphanumeric);
            !inside
        }
        '&' => starts_entity(rest),
        _ => false,
    }
}

/// Whether what follows an `&` reads as an entity or character reference (`lt;`, `#60;`,
/// `#x3C;`). Only the next 33 bytes are looked at: a text of many `&` and no `;` would
/// otherwise be searched to its end once for each.
fn starts_entity(rest: &str) -> bool {
    let window = &rest.as_bytes()[..rest.len().min(33)];
    let Some(end) = window.iter().position(|&b| b == b';').filter(|&e| e > 0) else {
        return false;
    };
    let name = &rest[..end];
    if let Some(num) = name.strip_prefix('#') {
        return match num.strip_prefix(['x', 'X']) {
            Some(hex) => !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()),
            None => !num.is_empty() && num.chars().all(|c| c.is_ascii_digit()),
        };
    }
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric())
}

/// A paragraph line that CommonMark would read as the start of another block, escaped:
/// `# heading`, `> quote`, `- item`, `+ item`, `1. item`, `1) item`, `~~~` fences, and lines
/// of only `=`, `-`, `_` or `*` (rules and setext underlines).
fn escape_line_start(line: &str) -> Cow<'_, str> {
    let ends_marker = |rest: &str| rest.is_empty() || rest.starts_with([' ', '\t']);
    let hashes = line.len() - line.trim_start_matches('#').len();
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    // A line of one of `=`, `-`, `_`, `*` (and spaces): a setext underline or a rule.
    let mut marks = line.chars().filter(|c| !matches!(c, ' ' | '\t'));
    let only_rule_chars = marks
        .next()
        .is_some_and(|m| matches!(m, '=' | '-' | '_' | '*') && marks.all(|c| c == m));
    let escape_at = if (1..=6).contains(&hashes) && ends_marker(&line[hashes..])
        || line.starts_with(['>', '~'])
        || (line.starts_with(['-', '+']) && ends_marker(&line[1..]))
        || only_rule_chars
    {
        Some(0)
    } else if (1..=9).contains(&digits)
        && line[digits..].starts_with(['.', ')'])
        && ends_marker(&line[digits + 1..])
    {
        Some(digits)
    } else {
        None
    };
    match escape_at {
        Some(at) => Cow::Owned(format!("{}\\{}", &line[..at], &line[at..])),
        None => Cow::Borrowed(line),
    }
}

/// A table cell's text with every `|` escaped (text escapes its own; code spans do not).
fn escape_pipes(cell: String) -> String {
    if !cell.contains('|') {
        return cell;
    }
    let mut out = String::with_capacity(cell.len());
    let mut escaped = false;
    for c in cell.chars() {
        if c == '|' && !escaped {
            out.push('\\');
        }
        escaped = c == '\\' && !escaped;
        out.push(c);
    }
    out
}

/// Appends a link destination as CommonMark reads it: in angle brackets when it holds
/// parentheses or spaces (a URL keeps neither `<` nor `>` unencoded).
fn push_destination(out: &mut String, url: &Url) {
    let s = url.as_str();
    if s.bytes().any(|b| matches!(b, b'(' | b')' | b' ')) {
        out.push('<');
        out.push_str(s);
        out.push('>');
    } else {
        out.push_str(s);
    }
}

/// Appends inline Markdown to `buf` so that it keeps its meaning (only ever appending: an
/// enclosing element may split `buf` where it started): delimiters touching the previous ones
/// would merge into one run, and a `!` just before a link would make it an image; a space
/// keeps them apart.
fn push_inline(buf: &mut String, s: &str) {
    let last = buf.chars().last().filter(|_| !escaped_end(buf));
    let merges = s.starts_with(['*', '~']) && matches!(last, Some('*' | '~'));
    if merges || (s.starts_with('[') && last == Some('!')) {
        buf.push(' ');
    }
    buf.push_str(s);
}

/// Whether `s` holds one of `chars` not escaped by a backslash.
fn has_unescaped(s: &str, chars: [char; 2]) -> bool {
    let mut escaped = false;
    for c in s.chars() {
        if !escaped && chars.contains(&c) {
            return true;
        }
        escaped = c == '\\' && !escaped;
    }
    false
}

/// Whether `s` ends with a backslash-escaped character.
fn escaped_end(s: &str) -> bool {
    let mut chars = s.chars().rev();
    chars.next();
    chars.take_while(|&c| c == '\\').count() % 2 == 1
}

/// `s` as (leading sentence punctuation to move out, the rest, trailing sentence punctuation),
/// white space at the edges going with the punctuation; the leading part only when
/// `after_word`. Sentence punctuation is what the converter never writes as syntax.
fn split_punctuation(s: &str, after_word: bool) -> (&str, &str, &str) {
    let sentence =
        |c: char| matches!(c, '.' | ',' | ':' | ';' | '?' | '"' | '\'') || c.is_whitespace();
    let lead = if after_word {
        s.len() - s.trim_start_matches(|c| sentence(c) || c == '(').len()
    } else {
        0
    };
    let rest = &s[lead..];
    let trail = rest.len() - rest.trim_end_matches(sentence).len();
    (
        &s[..lead],
        &rest[..rest.len() - trail],
        &rest[rest.len() - trail..],
    )
}

/// The longest run of backticks in `s`.
fn longest_backtick_run(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

fn indent_item(marker: &str, body: &str) -> String {
    let lines = memchr::memchr_iter(b'\n', body.as_bytes()).count() + 1;
    let mut out = String::with_capacity(body.len() + marker.len() * lines);
    for (i, line) in body.lines().enumerate() {
        if i == 0 {
            out.push_str(marker);
        } else {
            out.push('\n');
            if !line.is_empty() {
                out.extend(std::iter::repeat_n(' ', marker.len()));
            }
        }
        out.push_str(line);
    }
    out
}

impl Renderer<'_> {
    /// Adds a finished block, counting it.
    fn emit(&self, out: &mut Vec<String>, block: String) {
        if self.meter.add(block.len()) {
            out.push(block);
        }
    }

    /// Turns the inline text gathered in `buf` into a paragraph, its lines (from `<br>`) kept
    /// apart by hard breaks. In Markdown, a line that would start a block (a heading, a list
    /// item, a quote, a rule) is escaped.
    fn flush(&self, buf: &mut String, out: &mut Vec<String>) {
        if buf.trim().is_empty() {
            buf.clear();
            return;
        }
        let mut text = String::with_capacity(buf.len());
        for line in buf.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if !text.is_empty() {
                text.push_str(if self.md { "\\\n" } else { "\n" });
            }
            if self.md {
                text.push_str(&escape_line_start(line));
            } else {
                text.push_str(line);
            }
        }
        if !text.is_empty() {
            self.emit(out, text);
        }
        buf.clear();
    }

    fn elements<'b>(&self, el: ElementRef<'b>) -> Vec<ElementRef<'b>> {
        el.children()
            .filter_map(ElementRef::wrap)
            .filter(|c| !self.filter.skips(c))
            .collect()
    }

    /// The content of a container: runs of inline content become paragraphs, block children
    /// render as blocks.
    fn container(&self, el: ElementRef, out: &mut Vec<String>) {
        let mut buf = String::new();
        for child in el.children() {
            match child.value() {
                Node::Text(t) => self.text(t, &mut buf),
                Node::Element(e) => {
                    let Some(c) = ElementRef::wrap(child) else {
                        continue;
                    };
                    if self.filter.skips(&c) {
                        continue;
                    }
                    if is_block(e.name()) {
                        self.flush(&mut buf, out);
                        self.block(c, out);
                    } else {
                        self.inline(c, &mut buf);
                    }
                }
                _ => {}
            }
        }
        self.flush(&mut buf, out);
    }

    fn block(&self, el: ElementRef, out: &mut Vec<String>) {
        if !self.meter.step() {
            return;
        }
        let name = el.value().name();
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let mut buf = String::new();
                self.inline_children(el, &mut buf);
                let title = collapsed([buf.as_str()]);
                if !title.is_empty() {
                    let level = usize::from(name.as_bytes()[1] - b'0');
                    let heading = if self.md {
                        // A heading's trailing `#`s after a space would be read as its closing.
                        let run = title.len() - title.trim_end_matches('#').len();
                        let title = match run {
                            0 => title,
                            _ => {
                                let at = title.len() - run;
                                format!("{}\\{}", &title[..at], &title[at..])
                            }
                        };
                        format!("{} {title}", "#".repeat(level))
                    } else {
                        title
                    };
                    self.emit(out, heading);
                }
            }
            "pre" => self.pre(el, out),
            "ul" | "ol" => self.list(el, name == "ol", out),
            "table" => self.table(el, out),
            "hr" => {
                if self.md {
                    self.emit(out, "---".into());
                }
            }
            "blockquote" => {
                let mut inner = Vec::new();
                self.container(el, &mut inner);
                let inner = inner.join("\n\n");
                if inner.is_empty() || !self.meter.add(inner.len()) {
                    return;
                }
                let quoted = if self.md {
                    inner
                        .lines()
                        .map(|l| {
                            if l.is_empty() {
                                ">".into()
                            } else {
                                format!("> {l}")
                            }
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                } else {
                    inner
                };
                self.emit(out, quoted);
            }
            _ => self.container(el, out),
        }
    }

    fn pre(&self, el: ElementRef, out: &mut Vec<String>) {
        let code: String = el.text().collect();
        if !self.meter.add(code.len()) {
            return;
        }
        let code = code.trim_end_matches(['\n', '\r']);
        let code = code.strip_prefix('\n').unwrap_or(code);
        if code.trim().is_empty() {
            return;
        }
        if !self.md {
            self.emit(out, code.to_string());
            return;
        }
        let class_of = |e: ElementRef| attr(e.value(), local_name!("class")).map(str::to_string);
        let lang = std::iter::once(el)
            .chain(el.descendants().filter_map(ElementRef::wrap))
            .filter_map(class_of)
            .flat_map(|c| {
                c.split_whitespace()
                    .filter_map(|w| {
                        w.strip_prefix("language-")
                            .or_else(|| w.strip_prefix("lang-"))
                    })
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .next()
            .unwrap_or_default();
        let fence = "`".repeat(longest_backtick_run(code).max(2) + 1);
        self.emit(out, format!("{fence}{lang}\n{code}\n{fence}"));
    }

    fn list(&self, el: ElementRef, ordered: bool, out: &mut Vec<String>) {
        let mut n: u64 = attr(el.value(), local_name!("start"))
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1);
        let mut items = Vec::new();
        for child in self.elements(el) {
            let mut parts = Vec::new();
            let name = child.value().name();
            if name == "li" {
                self.container(child, &mut parts);
            } else {
                self.block(child, &mut parts);
            }
            let body = parts.join("\n");
            if body.is_empty() || !self.meter.add(body.len()) {
                continue;
            }
            if name == "ul" || name == "ol" {
                items.push(indent_item("  ", &body));
                continue;
            }
            let marker = if ordered {
                let m = format!("{n}. ");
                n += 1;
                m
            } else {
                "- ".to_string()
            };
            items.push(indent_item(&marker, &body));
        }
        if !items.is_empty() {
            self.emit(out, items.join("\n"));
        }
    }

    fn rows<'b>(&self, table: ElementRef<'b>) -> Vec<ElementRef<'b>> {
        let mut rows = Vec::new();
        for child in self.elements(table) {
            match child.value().name() {
                "tr" => rows.push(child),
                "thead" | "tbody" | "tfoot" => rows.extend(
                    self.elements(child)
                        .into_iter()
                        .filter(|r| r.value().name() == "tr"),
                ),
                _ => {}
            }
        }
        rows
    }

    fn table(&self, el: ElementRef, out: &mut Vec<String>) {
        let rows: Vec<Vec<String>> = self
            .rows(el)
            .into_iter()
            .map(|tr| {
                self.elements(tr)
                    .into_iter()
                    .filter(|c| matches!(c.value().name(), "td" | "th"))
                    .map(|cell| {
                        let mut buf = String::new();
                        self.inline_children(cell, &mut buf);
                        let text = collapsed([buf.as_str()]);
                        if self.md {
                            escape_pipes(text)
                        } else {
                            text
                        }
                    })
                    .collect::<Vec<_>>()
            })
            .filter(|r| !r.is_empty())
            .collect();
        let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
        if cols == 0 {
            return;
        }
        if !self.md {
            let lines: Vec<String> = rows.iter().map(|r| r.join("\t")).collect();
            self.emit(out, lines.join("\n"));
            return;
        }
        // Every row is padded to the widest: count that before building it.
        if !self
            .meter
            .add(rows.len().saturating_mul(cols).saturating_mul(3))
        {
            return;
        }
        let line = |r: &Vec<String>| {
            let mut line = String::from("|");
            for i in 0..cols {
                line.push(' ');
                line.push_str(r.get(i).map_or("", String::as_str));
                line.push_str(" |");
            }
            line
        };
        let mut lines = vec![line(&rows[0])];
        lines.push(format!("|{}", " --- |".repeat(cols)));
        lines.extend(rows[1..].iter().map(line));
        self.emit(out, lines.join("\n"));
    }

    fn inline_children(&self, el: ElementRef, buf: &mut String) {
        for child in el.children() {
            match child.value() {
                Node::Text(t) => self.text(t, buf),
                Node::Element(_) => {
                    if let Some(c) = ElementRef::wrap(child) {
                        if !self.filter.skips(&c) {
                            self.inline(c, buf);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Renders the children into `buf`, then wraps what they wrote in `mark` with the
    /// surrounding white space kept outside the markers.
    fn wrapped(&self, el: ElementRef, buf: &mut String, open: &str, close: &str) {
        let start = buf.len();
        self.inline_children(el, buf);
        let inner = buf.split_off(start);
        let trimmed = inner.trim();
        if trimmed.is_empty() {
            buf.push_str(&inner);
            return;
        }
        if inner.starts_with(char::is_whitespace) && !buf.ends_with([' ', '\n']) {
            buf.push(' ');
        }
        // Emphasis delimiters next to punctuation only count where CommonMark's flanking rules
        // let them: sentence punctuation at the ends goes outside them (at the end always, at
        // the start after a letter or digit). Where other punctuation is left at an edge (a
        // link's parenthesis, a code span, nested emphasis), the text goes without this
        // emphasis rather than with delimiters that would show as text.
        let (before, core, after) = if open.starts_with(['*', '~']) {
            let after_word = buf.chars().last().is_some_and(char::is_alphanumeric);
            split_punctuation(trimmed, after_word)
        } else {
            ("", trimmed, "")
        };
        let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_punctuation());
        let plain = open.starts_with(['*', '~'])
            && (core.is_empty()
                || edge(core.chars().last())
                || (edge(core.chars().next())
                    && before.is_empty()
                    && buf.chars().last().is_some_and(char::is_alphanumeric))
                // Emphasis inside emphasis: the inner one stays, this one goes.
                || has_unescaped(core, ['*', '~']));
        if plain {
            push_inline(buf, trimmed);
        } else {
            push_inline(buf, before);
            push_inline(buf, open);
            buf.push_str(core);
            buf.push_str(close);
            buf.push_str(after);
        }
        if inner.ends_with(char::is_whitespace) {
            buf.push(' ');
        }
    }

    fn inline(&self, el: ElementRef, buf: &mut String) {
        if !self.meter.step() {
            return;
        }
        let name = el.value().name();
        match name {
            "br" => {
                while buf.ends_with(' ') {
                    buf.pop();
                }
                // Only a line break puts a newline in inline text: a paragraph makes it a hard
                // break, a heading or a table cell a space.
                buf.push('\n');
            }
            "img" if self.md => {
                let src = attr(el.value(), local_name!("src")).and_then(|s| self.links.resolve(s));
                if let Some(src) = src.filter(|s| self.meter.add(s.as_str().len())) {
                    let alt = attr(el.value(), local_name!("alt")).unwrap_or_default();
                    let alt = collapsed([alt]);
                    let alt = alt.replace(['[', ']'], "");
                    buf.push_str("![");
                    buf.push_str(&alt);
                    buf.push_str("](");
                    push_destination(buf, &src);
                    buf.push(')');
                }
            }
            "a" if self.md => match attr(el.value(), local_name!("href"))
                .and_then(|h| self.links.resolve(h))
                .filter(|h| self.meter.add(h.as_str().len()))
            {
                Some(href) => {
                    let mut close = String::with_capacity(href.as_str().len() + 5);
                    close.push_str("](");
                    push_destination(&mut close, &href);
                    close.push(')');
                    self.wrapped(el, buf, "[", &close)
                }
                None => self.inline_children(el, buf),
            },
            "strong" | "b" if self.md => self.wrapped(el, buf, "**", "**"),
            "em" | "i" if self.md => self.wrapped(el, buf, "*", "*"),
            "del" | "s" | "strike" if self.md => self.wrapped(el, buf, "~~", "~~"),
            "code" | "kbd" | "samp" | "tt" => {
                let code = collapsed(el.text());
                if code.is_empty() || !self.meter.add(code.len()) {
                    return;
                }
                if !self.md {
                    buf.push_str(&code);
                    return;
                }
                let ticks = longest_backtick_run(&code) + 1;
                // Backticks touching the previous code span's would merge with them.
                if buf.ends_with('`') {
                    buf.push(' ');
                }
                let pad = if code.starts_with('`') || code.ends_with('`') {
                    " "
                } else {
                    ""
                };
                buf.extend(std::iter::repeat_n('`', ticks));
                buf.push_str(pad);
                buf.push_str(&code);
                buf.push_str(pad);
                buf.extend(std::iter::repeat_n('`', ticks));
            }
            _ if is_block(name) => {
                // A block inside inline content (a heading inside a link, a list in a cell).
                if !buf.ends_with([' ', '\n']) && !buf.is_empty() {
                    buf.push(' ');
                }
                self.inline_children(el, buf);
                if !buf.ends_with([' ', '\n']) {
                    buf.push(' ');
                }
            }
            _ => self.inline_children(el, buf),
        }
    }

    /// Appends text with white space collapsed and, in Markdown, syntax characters escaped.
    fn text(&self, text: &str, buf: &mut String) {
        if !self.meter.add(text.len()) {
            return;
        }
        buf.reserve(text.len());
        let mut prev = buf.chars().last();
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            // A run of ASCII that is neither space nor syntax is copied as it is.
            let run = bytes[i..].iter().take_while(|&&b| self.plain(b)).count();
            if run > 0 {
                buf.push_str(&text[i..i + run]);
                prev = Some(char::from(bytes[i + run - 1]));
                i += run;
                continue;
            }
            let Some(c) = text[i..].chars().next() else {
                break;
            };
            i += c.len_utf8();
            if c.is_whitespace() {
                if !matches!(prev, None | Some(' ') | Some('\n')) {
                    buf.push(' ');
                    prev = Some(' ');
                }
                continue;
            }
            if self.md && escapes(prev, c, &text[i..]) {
                buf.push('\\');
            }
            buf.push(c);
            prev = Some(c);
        }
    }

    /// Whether an ASCII byte of text is written as it is: not white space and, in Markdown,
    /// none of the characters [`escapes`] may escape.
    fn plain(&self, b: u8) -> bool {
        b.is_ascii_graphic() && !(self.md && (SYNTAX.contains(&b) || b == b'_' || b == b'&'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::budget::Budget;
    use std::collections::{HashMap, HashSet};

    /// Pieces that exercise every branch of the text's writing: syntax characters, ASCII and
    /// other white space, controls, non-ASCII letters, entities.
    const PIECES: &[&str] = &[
        "a", "Z9", ".", " ", "  ", "\t", "\n", "\r", "\u{a0}", "\u{3000}", "é", "字", "_", "x_y",
        "*", "`", "[", "]", "<", "|", "~", "\\", "&", "&lt;", "&#60;", "&x", "#", "-", "\u{1}",
        "\u{7f}",
    ];

    /// Strings of up to 12 pieces, the same every run.
    fn samples(n: usize) -> Vec<String> {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as usize
        };
        (0..n)
            .map(|_| {
                (0..next() % 13)
                    .map(|_| PIECES[next() % PIECES.len()])
                    .collect()
            })
            .collect()
    }

    /// What the text's writing did a character at a time, before it copied runs.
    fn by_char(md: bool, text: &str, buf: &mut String) {
        let mut prev = buf.chars().last();
        for (i, c) in text.char_indices() {
            if c.is_whitespace() {
                if !matches!(prev, None | Some(' ') | Some('\n')) {
                    buf.push(' ');
                    prev = Some(' ');
                }
                continue;
            }
            if md && escapes(prev, c, &text[i + c.len_utf8()..]) {
                buf.push('\\');
            }
            buf.push(c);
            prev = Some(c);
        }
    }

    #[test]
    fn text_is_written_as_a_character_at_a_time_would() {
        let budget = Budget::unlimited();
        let meter = Meter::new(&budget);
        let filter = Filter {
            excluded: HashSet::new(),
            only_main_content: false,
        };
        let links = Resolver {
            base: Url::parse("https://example.com/").unwrap(),
            known: HashMap::default(),
        };
        for md in [true, false] {
            let r = Renderer {
                filter: &filter,
                links: &links,
                md,
                meter: &meter,
            };
            for text in samples(5_000) {
                for before in ["", "a", "_", " ", "x\n"] {
                    let (mut got, mut want) = (before.to_string(), before.to_string());
                    r.text(&text, &mut got);
                    by_char(md, &text, &mut want);
                    assert_eq!(got, want, "{text:?} after {before:?}, markdown {md}");
                }
            }
        }
    }

    #[test]
    fn code_text_is_collapsed_as_split_and_joined() {
        let texts = samples(2_000);
        for pair in texts.chunks(2) {
            // Text split over elements: runs of white space may span them.
            let html = format!(
                "<code>{}<span>{}</span>{}</code>",
                html_escape(&pair[0]),
                html_escape(pair.get(1).map_or("", String::as_str)),
                html_escape(&pair[0])
            );
            let doc = scraper::Html::parse_fragment(&html);
            let code = doc
                .root_element()
                .first_child()
                .and_then(ElementRef::wrap)
                .unwrap();
            let joined: String = code.text().collect();
            let want = joined.split_whitespace().collect::<Vec<_>>().join(" ");
            assert_eq!(collapsed(code.text()), want, "{html:?}");
        }
    }

    fn html_escape(s: &str) -> String {
        s.replace('&', "&amp;").replace('<', "&lt;")
    }
}
