//! A tokenizer for well-formed HTML: the tags, attributes, comments, doctypes, text and
//! character references nearly every page is made of, found with byte searches instead of a
//! state transition per character (where html5ever's tokenizer spends most of a parse). It
//! produces the tokens html5ever's tokenizer would, and hands them to [`Direct`] (a well-nested
//! page) or html5ever's tree builder (any other), so the tree is the same. At the first
//! construct it does not take (a NUL, a malformed tag, a bogus comment, CDATA, an escaped
//! script, a numeric reference without its semicolon ...) it stops, and the page is tokenized by
//! html5ever from the start.

use super::bounded::Bounded;
use super::{checked, Parser, MAX_ATTRIBUTES};
use crate::engine::budget::{Budget, Exceeded};
use ego_tree::NodeId;
use html5ever::data::NAMED_ENTITIES;
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{Doctype, Tag, TagKind, Token, TokenSink, TokenSinkResult};
use html5ever::tree_builder::{TreeBuilder, TreeSink};
use html5ever::{local_name, ns, Attribute, LocalName, QualName};
use memchr::{memchr, memmem};
use scraper::Html;
use std::borrow::Cow;

mod direct;
use direct::Direct;

/// Tokens between two looks at the budget's deadline.
const TOKENS_PER_CHECK: usize = 256;
/// Longest name in the table of named character references, its semicolon included.
const LONGEST_ENTITY: usize = 32;

/// Why tokenizing stopped before the end.
enum Stop {
    /// The markup needs html5ever's tokenizer.
    NotSimple,
    /// The tree needs html5ever's tree builder.
    NotDirect,
    Exceeded(Exceeded),
}

impl From<Exceeded> for Stop {
    fn from(e: Exceeded) -> Self {
        Stop::Exceeded(e)
    }
}

type Step<T = ()> = Result<T, Stop>;

/// What builds the tree from the tokens: [`Direct`] or html5ever's tree builder.
trait Build {
    /// Builds with one more token.
    fn token(&mut self, token: Token) -> Step<TokenSinkResult<NodeId>>;
    fn sink(&self) -> &Bounded;
    /// Ends the tree: its sink, ready to finish.
    fn into_sink(self) -> Bounded;
}

impl Build for TreeBuilder<NodeId, Bounded> {
    fn token(&mut self, token: Token) -> Step<TokenSinkResult<NodeId>> {
        Ok(self.process_token(token, 1))
    }

    fn sink(&self) -> &Bounded {
        &self.sink
    }

    fn into_sink(self) -> Bounded {
        self.end();
        self.sink
    }
}

/// Parses `source` if its markup is all of the simple kind; `None` when it is not. A
/// well-nested page is built by [`Direct`], any other by html5ever's tree builder.
pub(super) fn parse(source: &str, budget: &Budget) -> Result<Option<(Html, Parser)>, Exceeded> {
    // html5ever hands a NUL to the tree builder as a token of its own.
    if memchr(0, source.as_bytes()).is_some() {
        return Ok(None);
    }
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    let source = newlines_normalized(source);
    match build(&source, Direct::new(Bounded::new(source.len())), budget) {
        Ok(html) => return Ok(Some((html, Parser::Direct))),
        Err(Stop::NotDirect) => {}
        Err(Stop::NotSimple) => return Ok(None),
        Err(Stop::Exceeded(e)) => return Err(e),
    }
    let builder = TreeBuilder::new(Bounded::new(source.len()), Default::default());
    match build(&source, builder, budget) {
        Ok(html) => Ok(Some((html, Parser::Simple))),
        Err(Stop::NotSimple | Stop::NotDirect) => Ok(None),
        Err(Stop::Exceeded(e)) => Err(e),
    }
}

/// Tokenizes `source` (newlines normalized) into `builder`.
fn build(source: &str, builder: impl Build, budget: &Budget) -> Step<Html> {
    let mut tokens = Tokens {
        src: source,
        pos: 0,
        builder,
        emitted: 0,
        budget,
    };
    tokens.run()?;
    let sink = tokens.builder.into_sink();
    let moved = sink.moved();
    Ok(checked(TreeSink::finish(sink), moved)?)
}

/// The input stream's newlines as the tokenizer sees them: CR LF and a lone CR become LF.
fn newlines_normalized(s: &str) -> Cow<'_, str> {
    if memchr(b'\r', s.as_bytes()).is_none() {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.replace("\r\n", "\n").replace('\r', "\n"))
}

/// HTML's whitespace (CR is gone by now).
fn is_space(c: u8) -> bool {
    matches!(c, b'\t' | b'\n' | b'\x0C' | b' ')
}

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| is_space(*c)) {
        i += 1;
    }
    i
}

/// The index of the first byte at or after `from` that `stop` accepts.
fn find(b: &[u8], from: usize, stop: impl Fn(u8) -> bool) -> Step<usize> {
    match b
        .get(from..)
        .and_then(|rest| rest.iter().position(|c| stop(*c)))
    {
        Some(i) => Ok(from + i),
        None => Err(Stop::NotSimple),
    }
}

/// Whether a `<` followed by `next` opens markup (otherwise it is text).
fn opens_markup(next: Option<&u8>) -> bool {
    next.is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, b'/' | b'!' | b'?'))
}

/// A tag or attribute name: ASCII letters lowercased. The commonest names are matched here
/// (comparing a few bytes) before interning, which hashes the name.
fn local_name(s: &str) -> LocalName {
    if s.bytes().any(|c| c.is_ascii_uppercase()) {
        return LocalName::from(s.to_ascii_lowercase());
    }
    match s {
        "a" => local_name!("a"),
        "div" => local_name!("div"),
        "span" => local_name!("span"),
        "p" => local_name!("p"),
        "li" => local_name!("li"),
        "ul" => local_name!("ul"),
        "ol" => local_name!("ol"),
        "code" => local_name!("code"),
        "pre" => local_name!("pre"),
        "td" => local_name!("td"),
        "tr" => local_name!("tr"),
        "th" => local_name!("th"),
        "table" => local_name!("table"),
        "tbody" => local_name!("tbody"),
        "thead" => local_name!("thead"),
        "em" => local_name!("em"),
        "strong" => local_name!("strong"),
        "b" => local_name!("b"),
        "i" => local_name!("i"),
        "img" => local_name!("img"),
        "br" => local_name!("br"),
        "h1" => local_name!("h1"),
        "h2" => local_name!("h2"),
        "h3" => local_name!("h3"),
        "h4" => local_name!("h4"),
        "section" => local_name!("section"),
        "dl" => local_name!("dl"),
        "dt" => local_name!("dt"),
        "dd" => local_name!("dd"),
        "html" => local_name!("html"),
        "head" => local_name!("head"),
        "body" => local_name!("body"),
        "meta" => local_name!("meta"),
        "link" => local_name!("link"),
        "script" => local_name!("script"),
        "style" => local_name!("style"),
        "title" => local_name!("title"),
        "nav" => local_name!("nav"),
        "input" => local_name!("input"),
        "form" => local_name!("form"),
        "button" => local_name!("button"),
        "label" => local_name!("label"),
        "class" => local_name!("class"),
        "href" => local_name!("href"),
        "id" => local_name!("id"),
        "rel" => local_name!("rel"),
        "src" => local_name!("src"),
        "alt" => local_name!("alt"),
        "type" => local_name!("type"),
        "name" => local_name!("name"),
        "content" => local_name!("content"),
        "lang" => local_name!("lang"),
        "role" => local_name!("role"),
        "width" => local_name!("width"),
        "height" => local_name!("height"),
        "colspan" => local_name!("colspan"),
        "rowspan" => local_name!("rowspan"),
        "charset" => local_name!("charset"),
        "target" => local_name!("target"),
        "value" => local_name!("value"),
        _ => LocalName::from(s),
    }
}

struct Tokens<'a, B> {
    src: &'a str,
    pos: usize,
    builder: B,
    emitted: usize,
    budget: &'a Budget,
}

impl<B: Build> Tokens<'_, B> {
    fn run(&mut self) -> Step {
        let (src, b) = (self.src, self.src.as_bytes());
        while self.pos < b.len() {
            let mut from = self.pos;
            let text_end = loop {
                match memchr(b'<', &b[from..]) {
                    None => break b.len(),
                    Some(i) if opens_markup(b.get(from + i + 1)) => break from + i,
                    Some(i) => from += i + 1,
                }
            };
            if text_end > self.pos {
                let text = decode(&src[self.pos..text_end], false)?;
                self.put(Token::CharacterTokens(text))?;
                self.pos = text_end;
            } else {
                self.markup()?;
            }
        }
        self.put(Token::EOFToken)
    }

    /// Hands a token to the tree builder, and checks the bounds after it.
    fn emit(&mut self, token: Token) -> Step<TokenSinkResult<NodeId>> {
        let result = self.builder.token(token)?;
        self.builder.sink().within_bounds()?;
        self.emitted += 1;
        if self.emitted.is_multiple_of(TOKENS_PER_CHECK) {
            self.budget.check()?;
        }
        Ok(result)
    }

    /// Hands the tree builder a token after which the tokenizer's state never changes.
    fn put(&mut self, token: Token) -> Step {
        self.emit(token).map(|_| ())
    }

    /// The markup at `pos`: a `<` that [`opens_markup`].
    fn markup(&mut self) -> Step {
        let b = &self.src.as_bytes()[self.pos..];
        match b.get(1).copied().unwrap_or(0) {
            c if c.is_ascii_alphabetic() => self.start_tag(),
            b'/' if b.get(2).is_some_and(u8::is_ascii_alphabetic) => self.end_tag(),
            b'!' if b[2..].starts_with(b"--") => self.comment(),
            b'?' => self.processing_instruction(),
            b'!' if b
                .get(2..9)
                .is_some_and(|k| k.eq_ignore_ascii_case(b"doctype")) =>
            {
                self.doctype()
            }
            _ => Err(Stop::NotSimple),
        }
    }

    fn start_tag(&mut self) -> Step {
        let (src, b) = (self.src, self.src.as_bytes());
        let start = self.pos + 1;
        let end = find(b, start, |c| is_space(c) || c == b'/' || c == b'>')?;
        let name = local_name(&src[start..end]);
        let mut attrs: Vec<Attribute> = Vec::new();
        let mut i = end;
        let self_closing = loop {
            i = skip_space(b, i);
            match b.get(i) {
                Some(b'>') => break false,
                Some(b'/') if b.get(i + 1) == Some(&b'>') => {
                    i += 1;
                    break true;
                }
                Some(b'/' | b'=') | None => return Err(Stop::NotSimple),
                Some(_) => {}
            }
            let name_end = find(b, i, |c| is_space(c) || matches!(c, b'/' | b'>' | b'='))?;
            let attr = &src[i..name_end];
            if attr.bytes().any(|c| matches!(c, b'"' | b'\'' | b'<')) {
                return Err(Stop::NotSimple);
            }
            i = skip_space(b, name_end);
            let value = if b.get(i) == Some(&b'=') {
                let (value, next) = attribute_value(src, skip_space(b, i + 1))?;
                i = next;
                value
            } else {
                StrTendril::new()
            };
            // A repeated attribute is dropped, as the tokenizer does, and those past the cap.
            let local = local_name(attr);
            if attrs.len() < MAX_ATTRIBUTES && !attrs.iter().any(|a| a.name.local == local) {
                attrs.push(Attribute {
                    name: QualName::new(None, ns!(), local),
                    value,
                });
            }
        };
        self.pos = i + 1;
        let tag = Tag {
            kind: TagKind::StartTag,
            name: name.clone(),
            self_closing,
            attrs,
        };
        match self.emit(Token::TagToken(tag))? {
            TokenSinkResult::Continue | TokenSinkResult::Script(_) => Ok(()),
            TokenSinkResult::RawData(kind) => self.raw_text(kind, &name),
            TokenSinkResult::Plaintext => Err(Stop::NotSimple),
        }
    }

    /// An end tag without attributes.
    fn end_tag(&mut self) -> Step {
        let (src, b) = (self.src, self.src.as_bytes());
        let start = self.pos + 2;
        let end = find(b, start, |c| is_space(c) || c == b'/' || c == b'>')?;
        let close = skip_space(b, end);
        if b.get(close) != Some(&b'>') {
            return Err(Stop::NotSimple);
        }
        self.pos = close + 1;
        let tag = Tag {
            kind: TagKind::EndTag,
            name: local_name(&src[start..end]),
            self_closing: false,
            attrs: Vec::new(),
        };
        match self.emit(Token::TagToken(tag))? {
            TokenSinkResult::Continue | TokenSinkResult::Script(_) => Ok(()),
            _ => Err(Stop::NotSimple),
        }
    }

    /// `<!-- ... -->`, neither abruptly closed (`<!-->`) nor holding `--!`.
    fn comment(&mut self) -> Step {
        let b = self.src.as_bytes();
        let from = self.pos + 4;
        let end = match memmem::find(&b[from..], b"-->") {
            Some(i) => from + i,
            None => return Err(Stop::NotSimple),
        };
        let text = &self.src[from..end];
        if text.starts_with('>') || text.starts_with("->") || text.contains("--!") {
            return Err(Stop::NotSimple);
        }
        self.pos = end + 3;
        self.put(Token::CommentToken(StrTendril::from_slice(text)))
    }

    /// `<?xml ... ?>`, which HTML reads as a comment up to the first `>`.
    fn processing_instruction(&mut self) -> Step {
        let from = self.pos + 1;
        let end = find(self.src.as_bytes(), from, |c| c == b'>')?;
        let text = StrTendril::from_slice(&self.src[from..end]);
        self.pos = end + 1;
        self.put(Token::CommentToken(text))
    }

    /// `<!DOCTYPE name>`, with a public and a system identifier or a system one.
    fn doctype(&mut self) -> Step {
        let (src, b) = (self.src, self.src.as_bytes());
        let mut i = self.pos + 9;
        if !b.get(i).is_some_and(|c| is_space(*c)) {
            return Err(Stop::NotSimple);
        }
        i = skip_space(b, i);
        let name_end = find(b, i, |c| is_space(c) || c == b'>')?;
        if name_end == i {
            return Err(Stop::NotSimple);
        }
        let name = src[i..name_end].to_ascii_lowercase();
        i = skip_space(b, name_end);
        let (mut public_id, mut system_id) = (None, None);
        if b.get(i) != Some(&b'>') {
            let keyword = b.get(i..i + 6).ok_or(Stop::NotSimple)?;
            let public = keyword.eq_ignore_ascii_case(b"public");
            if !public && !keyword.eq_ignore_ascii_case(b"system") {
                return Err(Stop::NotSimple);
            }
            i += 6;
            if !b.get(i).is_some_and(|c| is_space(*c)) {
                return Err(Stop::NotSimple);
            }
            let (id, next) = quoted_id(src, skip_space(b, i))?;
            i = next;
            if public {
                public_id = Some(id);
                if b.get(i) != Some(&b'>') {
                    if !b.get(i).is_some_and(|c| is_space(*c)) {
                        return Err(Stop::NotSimple);
                    }
                    i = skip_space(b, i);
                    if b.get(i) != Some(&b'>') {
                        let (id, next) = quoted_id(src, i)?;
                        system_id = Some(id);
                        i = skip_space(b, next);
                    }
                }
            } else {
                system_id = Some(id);
                i = skip_space(b, i);
            }
            if b.get(i) != Some(&b'>') {
                return Err(Stop::NotSimple);
            }
        }
        self.pos = i + 1;
        let doctype = Doctype {
            name: Some(StrTendril::from(name)),
            public_id: public_id.map(StrTendril::from_slice),
            system_id: system_id.map(StrTendril::from_slice),
            force_quirks: false,
        };
        self.put(Token::DoctypeToken(doctype))
    }

    /// The text of an element the tree builder asked to be read raw (`title`, `textarea`,
    /// `style`, `script` ...): up to its end tag, which the main loop then reads.
    fn raw_text(&mut self, kind: RawKind, name: &LocalName) -> Step {
        let (src, b) = (self.src, self.src.as_bytes());
        let end = match kind {
            RawKind::ScriptData => script_end(b, self.pos),
            RawKind::Rcdata | RawKind::Rawtext => raw_text_end(b, self.pos, name.as_bytes()),
            RawKind::ScriptDataEscaped(_) => return Err(Stop::NotSimple),
        };
        let text = &src[self.pos..end];
        let text = match kind {
            RawKind::Rcdata => decode(text, false)?,
            _ => StrTendril::from_slice(text),
        };
        if !text.is_empty() {
            self.put(Token::CharacterTokens(text))?;
        }
        self.pos = end;
        Ok(())
    }
}

/// Whether `b` holds `name` at `at`, in any case, followed by whitespace, `/` or `>`.
fn tag_name_at(b: &[u8], at: usize, name: &[u8]) -> bool {
    let after = at + name.len();
    b.get(at..after)
        .is_some_and(|n| n.eq_ignore_ascii_case(name))
        && b.get(after)
            .is_some_and(|c| is_space(*c) || matches!(c, b'/' | b'>'))
}

/// Where the raw text that starts at `from` ends: at `</name` followed by whitespace, `/` or
/// `>`, or at the end of the input.
fn raw_text_end(b: &[u8], mut from: usize, name: &[u8]) -> usize {
    while let Some(i) = memmem::find(&b[from..], b"</") {
        let at = from + i;
        if tag_name_at(b, at + 2, name) {
            return at;
        }
        from = at + 2;
    }
    b.len()
}

/// Where a script's text that starts at `from` ends: at its `</script`, which a `<!--` in the
/// script followed by a `<script` puts off until a `</script` or `-->` (the standard's script
/// data escaped states); or at the end of the input.
fn script_end(b: &[u8], from: usize) -> usize {
    const SCRIPT: &[u8] = b"script";
    #[derive(PartialEq)]
    enum State {
        Data,
        Escaped,
        DoubleEscaped,
    }
    let mut state = State::Data;
    // Dashes just before, in an escaped state (`-->` leaves it).
    let mut dashes = 0;
    let mut i = from;
    while i < b.len() {
        if state == State::Data {
            let Some(n) = memchr(b'<', &b[i..]) else {
                break;
            };
            i += n;
            if b.get(i + 1) == Some(&b'/') && tag_name_at(b, i + 2, SCRIPT) {
                return i;
            }
            if b[i + 1..].starts_with(b"!--") {
                (state, dashes) = (State::Escaped, 2);
                i += 4;
            } else {
                i += 1;
            }
            continue;
        }
        match b[i] {
            b'-' => dashes += 1,
            b'>' if dashes >= 2 => (state, dashes) = (State::Data, 0),
            b'<' => {
                dashes = 0;
                let closing = b.get(i + 1) == Some(&b'/') && tag_name_at(b, i + 2, SCRIPT);
                if state == State::Escaped && closing {
                    return i;
                }
                if state == State::Escaped && tag_name_at(b, i + 1, SCRIPT) {
                    state = State::DoubleEscaped;
                } else if state == State::DoubleEscaped && closing {
                    state = State::Escaped;
                }
            }
            _ => dashes = 0,
        }
        i += 1;
    }
    b.len()
}

/// An attribute's value starting at `i` (just past `=` and any whitespace), and the index
/// where the tag goes on.
fn attribute_value(src: &str, i: usize) -> Step<(StrTendril, usize)> {
    let b = src.as_bytes();
    match b.get(i) {
        Some(q @ (b'"' | b'\'')) => {
            let close = match memchr(*q, &b[i + 1..]) {
                Some(n) => i + 1 + n,
                None => return Err(Stop::NotSimple),
            };
            // Something other than whitespace, `/` or `>` right after the quote is an error.
            if !b
                .get(close + 1)
                .is_some_and(|c| is_space(*c) || matches!(c, b'/' | b'>'))
            {
                return Err(Stop::NotSimple);
            }
            Ok((decode(&src[i + 1..close], true)?, close + 1))
        }
        Some(b'>') | None => Err(Stop::NotSimple),
        Some(_) => {
            let end = find(b, i, |c| is_space(c) || c == b'>')?;
            let value = &src[i..end];
            if value
                .bytes()
                .any(|c| matches!(c, b'"' | b'\'' | b'<' | b'=' | b'`'))
            {
                return Err(Stop::NotSimple);
            }
            Ok((decode(value, true)?, end))
        }
    }
}

/// A doctype's quoted identifier at `i`, and the index after its closing quote.
fn quoted_id(src: &str, i: usize) -> Step<(&str, usize)> {
    let b = src.as_bytes();
    let Some(q @ (b'"' | b'\'')) = b.get(i) else {
        return Err(Stop::NotSimple);
    };
    let close = match memchr(*q, &b[i + 1..]) {
        Some(n) => i + 1 + n,
        None => return Err(Stop::NotSimple),
    };
    let id = &src[i + 1..close];
    if id.contains('>') {
        return Err(Stop::NotSimple);
    }
    Ok((id, close + 1))
}

/// Text or an attribute's value with its character references replaced.
fn decode(s: &str, in_attribute: bool) -> Step<StrTendril> {
    if memchr(b'&', s.as_bytes()).is_none() {
        return Ok(StrTendril::from_slice(s));
    }
    let mut out = StrTendril::new();
    let mut rest = s;
    while let Some(amp) = memchr(b'&', rest.as_bytes()) {
        out.push_slice(&rest[..amp]);
        let after = &rest[amp + 1..];
        match reference(after, in_attribute)? {
            Some((chars, used)) => {
                chars.into_iter().flatten().for_each(|c| out.push_char(c));
                rest = &after[used..];
            }
            None => {
                out.push_char('&');
                rest = after;
            }
        }
    }
    out.push_slice(rest);
    Ok(out)
}

/// What a reference stands for (one or two characters).
type Chars = [Option<char>; 2];

/// The reference that `after` (what follows a `&`) starts with, and its length; `None` when
/// the `&` stands for itself.
fn reference(after: &str, in_attribute: bool) -> Step<Option<(Chars, usize)>> {
    match after.as_bytes().first() {
        Some(b'#') => numeric(after).map(Some),
        Some(c) if c.is_ascii_alphanumeric() => Ok(named(after, in_attribute)),
        _ => Ok(None),
    }
}

/// `&#NNN;` or `&#xHHH;` of a character that needs no correction.
fn numeric(after: &str) -> Step<(Chars, usize)> {
    let b = after.as_bytes();
    let (radix, start) = match b.get(1) {
        Some(b'x' | b'X') => (16, 2),
        _ => (10, 1),
    };
    let digits = b[start..]
        .iter()
        .take_while(|c| c.is_ascii_digit() || (radix == 16 && c.is_ascii_hexdigit()))
        .count();
    if digits == 0 || digits > 8 || b.get(start + digits) != Some(&b';') {
        return Err(Stop::NotSimple);
    }
    let n =
        u32::from_str_radix(&after[start..start + digits], radix).map_err(|_| Stop::NotSimple)?;
    // Zero, surrogates, controls and noncharacters are replaced or reported: html5ever's call.
    let plain = matches!(n, 0x09 | 0x0A | 0x0C | 0x20..=0x7E)
        || ((0xA0..=0x10FFFF).contains(&n)
            && !(0xD800..=0xDFFF).contains(&n)
            && !(0xFDD0..=0xFDEF).contains(&n)
            && n & 0xFFFE != 0xFFFE);
    match char::from_u32(n) {
        Some(c) if plain => Ok(([Some(c), None], start + digits + 1)),
        _ => Err(Stop::NotSimple),
    }
}

/// A named reference: the longest name of the table that `after` starts with. One without its
/// semicolon (a legacy name such as `&amp` or `&copy`) stands for itself in an attribute when
/// a letter, digit or `=` follows it, as the standard has it for query strings.
fn named(after: &str, in_attribute: bool) -> Option<(Chars, usize)> {
    let b = after.as_bytes();
    let run = b.iter().take_while(|c| c.is_ascii_alphanumeric()).count();
    let entity = |n: usize| match NAMED_ENTITIES.get(&after[..n]) {
        Some(&(c1, c2)) if c1 != 0 => {
            Some([char::from_u32(c1), char::from_u32(c2).filter(|_| c2 != 0)])
        }
        _ => None,
    };
    if b.get(run) == Some(&b';') && run < LONGEST_ENTITY {
        if let Some(chars) = entity(run + 1) {
            return Some((chars, run + 1));
        }
    }
    let (n, chars) = (1..=run.min(LONGEST_ENTITY))
        .rev()
        .find_map(|n| Some((n, entity(n)?)))?;
    let historical = b
        .get(n)
        .is_some_and(|c| *c == b'=' || c.is_ascii_alphanumeric());
    (!(in_attribute && historical)).then_some((chars, n))
}

#[cfg(test)]
mod tests;
