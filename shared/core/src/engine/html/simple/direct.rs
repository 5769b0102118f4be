//! A tree builder for well-nested pages. Where every end tag closes the element opened last (or
//! one the standard lets a page leave open: a paragraph, a list item, a table's body or row),
//! the standard's tree construction only ever appends a node to the current one: no adoption
//! agency, no foster parenting, no reconstructed formatting. This builder does that with a stack
//! of names, and hands the sink the calls html5ever's tree builder would, in the same order, so
//! the tree is the same. At the first token where html5ever would do more (an end tag that does
//! not close the current element, a `<p>` left open before a block that is not its sibling,
//! text or a stray element in a table, a form in a form, MathML, a page in quirks mode (without
//! a doctype, or with an old one) or without its `<html>`, `<head>` and `<body>` tags ...) it
//! stops, and the page is built by html5ever's tree builder from the same tokens.

use super::super::bounded::Bounded;
use super::{Build, Step, Stop};
use ego_tree::NodeId;
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::TokenSink;
use html5ever::tokenizer::{Doctype, Tag, TagKind, Token, TokenSinkResult};
use html5ever::tree_builder::{ElementFlags, NodeOrText, QuirksMode, TreeBuilder, TreeSink};
use html5ever::{local_name, ns, Attribute, LocalName, QualName};

mod names;
use names::{
    bounds_scope, closes_open_p, closes_p, has_own_rules, is_heading, is_table_part, is_void,
    leaves_svg, opens_in_table_part, raw_kind, stops_item_search, svg_attributes, svg_name,
};

/// Where the page is, of the standard's insertion modes this builder follows. Inside `<body>`
/// the rules that apply follow from the current element (a table's, a row's ...).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Mode {
    Initial,
    BeforeHtml,
    BeforeHead,
    InHead,
    AfterHead,
    InBody,
    AfterBody,
    AfterAfterBody,
}

/// An open element.
struct Open {
    id: NodeId,
    name: LocalName,
    /// In the SVG namespace.
    svg: bool,
}

/// The builder: the sink it builds in, and where the page is.
pub(super) struct Direct {
    sink: Bounded,
    doc: NodeId,
    /// The open elements, outermost first.
    open: Vec<Open>,
    mode: Mode,
    /// The current element's text is read raw (`script`, `style`, `title`).
    raw: bool,
    /// A newline starting the next token's text is dropped (just after `<pre>`).
    skip_newline: bool,
}

/// The quirks mode a doctype sets, as html5ever's tree builder decides it (the standard's
/// lists of public and system identifiers).
fn quirks_mode(doctype: &Doctype) -> QuirksMode {
    let builder = TreeBuilder::new(Bounded::new(0), Default::default());
    let _ = builder.process_token(Token::DoctypeToken(doctype.clone()), 1);
    builder.sink.finish().quirks_mode
}

/// Gives up on the page: html5ever's tree builder takes it.
fn refuse<T>() -> Step<T> {
    Err(Stop::NotDirect)
}

fn is_whitespace(text: &str) -> bool {
    text.bytes().all(super::is_space)
}

impl Direct {
    pub(super) fn new(sink: Bounded) -> Self {
        let doc = sink.get_document();
        Direct {
            sink,
            doc,
            open: Vec::new(),
            mode: Mode::Initial,
            raw: false,
            skip_newline: false,
        }
    }

    fn current(&self) -> Option<&Open> {
        self.open.last()
    }

    fn current_is(&self, name: &LocalName) -> bool {
        self.current().is_some_and(|o| o.name == *name && !o.svg)
    }

    /// The node new nodes go into: the current element (the document before `<html>`).
    fn target(&self) -> NodeId {
        self.current().map_or(self.doc, |o| o.id)
    }

    /// Creates an element and appends it to the current node; opens it unless `void`.
    fn insert(&mut self, tag: Tag, void: bool) {
        self.insert_in(tag.name, tag.attrs, void, false);
    }

    /// [`insert`](Self::insert) in the HTML or the SVG namespace.
    fn insert_in(&mut self, name: LocalName, attrs: Vec<Attribute>, void: bool, svg: bool) {
        let ns = if svg { ns!(svg) } else { ns!(html) };
        let qname = QualName::new(None, ns, name.clone());
        let id = self
            .sink
            .create_element(qname, attrs, ElementFlags::default());
        let parent = self.target();
        self.sink.append(&parent, NodeOrText::AppendNode(id));
        if !void {
            self.open.push(Open { id, name, svg });
        }
    }

    fn append_text(&mut self, text: StrTendril) {
        let parent = self.target();
        self.sink.append(&parent, NodeOrText::AppendText(text));
    }

    fn append_comment(&mut self, parent: NodeId, text: StrTendril) {
        let comment = self.sink.create_comment(text);
        self.sink.append(&parent, NodeOrText::AppendNode(comment));
    }

    /// Whether an element named `name` is open in the default scope (the button scope with
    /// `button`).
    fn in_scope(&self, name: &LocalName, button: bool) -> bool {
        for open in self.open.iter().rev() {
            if open.name == *name {
                return true;
            }
            if bounds_scope(&open.name, button) {
                return false;
            }
        }
        false
    }

    fn is_open(&self, name: &LocalName) -> bool {
        self.open.iter().any(|o| o.name == *name)
    }

    /// Opens a raw text element: its text is read raw up to its end tag.
    fn open_raw(&mut self, tag: Tag, kind: RawKind) -> Step<TokenSinkResult<NodeId>> {
        self.insert(tag, false);
        self.raw = true;
        Ok(TokenSinkResult::RawData(kind))
    }

    fn doctype(&mut self, doctype: Doctype) -> Step<TokenSinkResult<NodeId>> {
        if self.mode != Mode::Initial {
            return refuse();
        }
        // In quirks mode a `<table>` leaves a `<p>` open; the other modes build alike.
        let mode = quirks_mode(&doctype);
        if mode == QuirksMode::Quirks {
            return refuse();
        }
        let Doctype {
            name,
            public_id,
            system_id,
            ..
        } = doctype;
        self.sink.append_doctype_to_document(
            name.unwrap_or_default(),
            public_id.unwrap_or_default(),
            system_id.unwrap_or_default(),
        );
        self.sink.set_quirks_mode(mode);
        self.mode = Mode::BeforeHtml;
        Ok(TokenSinkResult::Continue)
    }

    fn comment(&mut self, text: StrTendril) {
        let parent = match self.mode {
            Mode::Initial | Mode::BeforeHtml | Mode::AfterAfterBody => self.doc,
            Mode::AfterBody => self.open.first().map_or(self.doc, |o| o.id),
            _ => self.target(),
        };
        self.append_comment(parent, text);
    }

    fn text(&mut self, text: StrTendril) -> Step {
        if self.raw {
            self.append_text(text);
            return Ok(());
        }
        let blank = is_whitespace(&text);
        match self.mode {
            Mode::Initial | Mode::BeforeHtml | Mode::BeforeHead if blank => {}
            Mode::InHead | Mode::AfterHead | Mode::AfterBody | Mode::AfterAfterBody if blank => {
                self.append_text(text)
            }
            Mode::InBody => {
                let in_table = self
                    .current()
                    .is_some_and(|o| !o.svg && is_table_part(&o.name));
                if in_table && !blank {
                    return refuse();
                }
                self.append_text(text);
            }
            _ => return refuse(),
        }
        Ok(())
    }

    fn start_tag(&mut self, tag: Tag) -> Step<TokenSinkResult<NodeId>> {
        match self.mode {
            Mode::BeforeHtml if tag.name == local_name!("html") => {
                self.insert(tag, false);
                self.mode = Mode::BeforeHead;
            }
            Mode::BeforeHead if tag.name == local_name!("head") => {
                self.insert(tag, false);
                self.mode = Mode::InHead;
            }
            Mode::InHead => {
                if let Some(kind) = raw_kind(&tag.name) {
                    return self.open_raw(tag, kind);
                }
                if !matches!(
                    tag.name,
                    local_name!("base")
                        | local_name!("basefont")
                        | local_name!("bgsound")
                        | local_name!("link")
                        | local_name!("meta")
                ) {
                    return refuse();
                }
                self.insert(tag, true);
            }
            Mode::AfterHead if tag.name == local_name!("body") => {
                self.insert(tag, false);
                self.mode = Mode::InBody;
            }
            Mode::InBody => return self.body_start(tag),
            _ => return refuse(),
        }
        Ok(TokenSinkResult::Continue)
    }

    /// A start tag inside `<body>`.
    fn body_start(&mut self, tag: Tag) -> Step<TokenSinkResult<NodeId>> {
        let name = &tag.name;
        let Some(current) = self.current() else {
            return refuse();
        };
        if current.svg {
            return self.svg_start(tag);
        }
        if is_table_part(&current.name) {
            return self.table_start(tag);
        }
        if let Some(kind) = raw_kind(name) {
            return self.open_raw(tag, kind);
        }
        if *name == local_name!("svg") {
            let void = tag.self_closing;
            let attrs = svg_attributes(tag.attrs);
            self.insert_in(local_name!("svg"), attrs, void, true);
            return Ok(TokenSinkResult::Continue);
        }
        if has_own_rules(name) {
            return refuse();
        }
        let closes_p = closes_p(name)
            || is_heading(name)
            || matches!(
                *name,
                local_name!("pre")
                    | local_name!("listing")
                    | local_name!("table")
                    | local_name!("hr")
                    | local_name!("form")
                    | local_name!("li")
                    | local_name!("dd")
                    | local_name!("dt")
            );
        // An open `<p>` is closed: when it is the current element, only popped.
        if closes_p && self.in_scope(&local_name!("p"), true) {
            if !self.current_is(&local_name!("p")) {
                return refuse();
            }
            self.open.pop();
        }
        match *name {
            // A heading inside a heading closes it.
            _ if is_heading(name) && self.current().is_some_and(|o| is_heading(&o.name)) => {
                return refuse();
            }
            // A form inside a form is dropped.
            local_name!("form") if self.is_open(name) => return refuse(),
            // An `<a>` inside an `<a>` closes it (this builder looks past cells and captions).
            local_name!("a") if self.is_open(name) => return refuse(),
            local_name!("button") if self.in_scope(name, false) => return refuse(),
            // An item left open is closed by the next: when it is the current element, only
            // popped.
            local_name!("li") | local_name!("dd") | local_name!("dt") => {
                let list = *name == local_name!("li");
                for (depth, open) in self.open.iter().rev().enumerate() {
                    let closes = if list {
                        open.name == local_name!("li")
                    } else {
                        matches!(open.name, local_name!("dd") | local_name!("dt"))
                    };
                    if closes {
                        if depth > 0 {
                            return refuse();
                        }
                        self.open.pop();
                        break;
                    }
                    if stops_item_search(&open.name) {
                        break;
                    }
                }
            }
            local_name!("pre") | local_name!("listing") => self.skip_newline = true,
            _ => {}
        }
        let void = is_void(name) || *name == local_name!("hr");
        self.insert(tag, void);
        Ok(TokenSinkResult::Continue)
    }

    /// A start tag in a table, its body or row, or a column group: only their own children
    /// (and a row's body where the page leaves it out).
    fn table_start(&mut self, tag: Tag) -> Step<TokenSinkResult<NodeId>> {
        let parent = self.current().map(|o| o.name.clone());
        let Some(parent) = parent else {
            return refuse();
        };
        if parent == local_name!("table") && tag.name == local_name!("tr") {
            self.insert_in(local_name!("tbody"), Vec::new(), false, false);
        } else if !opens_in_table_part(&parent, &tag.name) {
            return refuse();
        }
        let void = tag.name == local_name!("col");
        self.insert(tag, void);
        Ok(TokenSinkResult::Continue)
    }

    /// A start tag inside an `<svg>`: an SVG element, its name and attributes spelled as SVG
    /// has them. HTML's elements (which would close the `<svg>`) and the elements whose content
    /// is HTML again are not followed.
    fn svg_start(&mut self, tag: Tag) -> Step<TokenSinkResult<NodeId>> {
        if leaves_svg(&tag.name) {
            return refuse();
        }
        let name = svg_name(tag.name);
        let attrs = svg_attributes(tag.attrs);
        self.insert_in(name, attrs, tag.self_closing, true);
        Ok(TokenSinkResult::Continue)
    }

    fn end_tag(&mut self, tag: Tag) -> Step {
        let name = &tag.name;
        if self.raw {
            if !self.current_is(name) {
                return refuse();
            }
            self.raw = false;
            self.open.pop();
            return Ok(());
        }
        match self.mode {
            Mode::InHead if *name == local_name!("head") && self.current_is(name) => {
                self.open.pop();
                self.mode = Mode::AfterHead;
            }
            Mode::InBody => self.body_end(name)?,
            Mode::AfterBody if *name == local_name!("html") => self.mode = Mode::AfterAfterBody,
            _ => return refuse(),
        }
        Ok(())
    }

    /// An end tag inside `<body>`: it closes the current element, or (for those whose rules
    /// close a `<p>` left open first, or a table's open body and row) the few elements the
    /// standard closes with it.
    fn body_end(&mut self, name: &LocalName) -> Step {
        let Some(current) = self.current() else {
            return refuse();
        };
        if current.svg {
            // SVG's names are matched in any case (the tag's is lowercase).
            if !current.name.eq_ignore_ascii_case(name) {
                return refuse();
            }
            self.open.pop();
            return Ok(());
        }
        match *name {
            local_name!("body") | local_name!("html") => {
                if !self.current_is(&local_name!("body")) {
                    return refuse();
                }
                self.mode = if *name == local_name!("body") {
                    Mode::AfterBody
                } else {
                    Mode::AfterAfterBody
                };
                return Ok(());
            }
            local_name!("table") => {
                while self.current().is_some_and(|o| {
                    matches!(
                        o.name,
                        local_name!("tbody")
                            | local_name!("thead")
                            | local_name!("tfoot")
                            | local_name!("tr")
                    )
                }) {
                    self.open.pop();
                }
            }
            // A `</p>` without its `<p>` stands for an empty paragraph.
            local_name!("p") if !self.in_scope(name, true) => {
                if is_table_part(&current.name) {
                    return refuse();
                }
                self.insert_in(local_name!("p"), Vec::new(), true, false);
                return Ok(());
            }
            // Paragraphs and items left open are closed first (those named like the tag
            // excepted).
            _ if *name != local_name!("p") && closes_open_p(name) => {
                while self.current().is_some_and(|o| {
                    o.name != *name
                        && matches!(
                            o.name,
                            local_name!("p")
                                | local_name!("li")
                                | local_name!("dd")
                                | local_name!("dt")
                        )
                }) {
                    self.open.pop();
                }
            }
            _ => {}
        }
        if !self.current_is(name) {
            return refuse();
        }
        self.open.pop();
        Ok(())
    }
}

impl Build for Direct {
    fn token(&mut self, token: Token) -> Step<TokenSinkResult<NodeId>> {
        let skip_newline = std::mem::take(&mut self.skip_newline);
        match token {
            Token::DoctypeToken(doctype) => return self.doctype(doctype),
            Token::TagToken(tag) => match tag.kind {
                TagKind::StartTag => return self.start_tag(tag),
                TagKind::EndTag => self.end_tag(tag)?,
            },
            Token::CommentToken(text) => self.comment(text),
            Token::CharacterTokens(mut text) => {
                if skip_newline && text.starts_with('\n') {
                    text.pop_front(1);
                }
                if !text.is_empty() {
                    self.text(text)?;
                }
            }
            // The end of the page leaves the tree as it is once in `<body>`.
            Token::EOFToken if self.mode >= Mode::InBody => {}
            Token::EOFToken | Token::NullCharacterToken | Token::ParseError(_) => return refuse(),
        }
        Ok(TokenSinkResult::Continue)
    }

    fn sink(&self) -> &Bounded {
        &self.sink
    }

    fn into_sink(self) -> Bounded {
        self.sink
    }
}
