//! A Word document (`.docx`) as Markdown, within bounds. A `.docx` is a zip of XML parts; a
//! small one can inflate without end (a zip bomb) or hold a million tiny entries, so: at most
//! [`MAX_ENTRIES`] entries, the body part inflates to at most [`MAX_BODY_XML`] bytes (counted
//! as it inflates, whatever the entry claims), and the parse stops at the budget's deadline.
//! Headings, list items and tables become their Markdown; other paragraphs are text.

use super::budget::{Budget, Exceeded};
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;
use std::io::{Cursor, Read};

/// Most entries of one document's zip.
pub const MAX_ENTRIES: usize = 10_000;
/// Most bytes the body part (`word/document.xml`) may inflate to.
pub const MAX_BODY_XML: u64 = 64 * 1024 * 1024;
/// Most bytes the properties part (`docProps/core.xml`) is read to.
const MAX_CORE_XML: u64 = 1024 * 1024;

/// The media type of a `.docx`.
pub const MEDIA_TYPE: &str =
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document";

/// Whether a URL's path names a Word document.
pub fn is_docx_path(path: &str) -> bool {
    path.rsplit_once('.')
        .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case("docx"))
}

/// Why a Word document yields no text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocxError {
    #[error("the Word document cannot be read: {0}")]
    Unreadable(String),
    #[error(transparent)]
    Exceeded(#[from] Exceeded),
}

/// What a Word document says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocxText {
    pub markdown: String,
    pub text: String,
    pub title: Option<String>,
    pub author: Option<String>,
}

fn unreadable(e: impl std::fmt::Display) -> DocxError {
    DocxError::Unreadable(e.to_string())
}

/// Reads a `.docx` within bounds.
pub fn read(bytes: &[u8], budget: &Budget) -> Result<DocxText, DocxError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).map_err(unreadable)?;
    if zip.len() > MAX_ENTRIES {
        return Err(Exceeded::TooComplex(format!(
            "the document has more than {MAX_ENTRIES} parts"
        ))
        .into());
    }
    let body = part(&mut zip, "word/document.xml", MAX_BODY_XML)?
        .ok_or_else(|| unreadable("it has no word/document.xml"))?;
    let blocks = blocks(&body, budget)?;
    // The properties are a nicety: one that cannot be read is left out.
    let core = part(&mut zip, "docProps/core.xml", MAX_CORE_XML)
        .ok()
        .flatten()
        .unwrap_or_default();
    Ok(DocxText {
        markdown: markdown(&blocks),
        text: text(&blocks),
        title: property(&core, "dc:title"),
        author: property(&core, "dc:creator"),
    })
}

/// One part of the zip, inflated to at most `cap` bytes (over it: `TOO_LARGE`).
fn part(
    zip: &mut zip::ZipArchive<Cursor<&[u8]>>,
    name: &str,
    cap: u64,
) -> Result<Option<Vec<u8>>, DocxError> {
    let file = match zip.by_name(name) {
        Ok(f) => f,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(unreadable(e)),
    };
    let too_large = || {
        DocxError::from(Exceeded::TooLarge(format!(
            "{name} inflates to more than {} MiB",
            cap >> 20
        )))
    };
    if file.size() > cap {
        return Err(too_large());
    }
    let mut out = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut out)
        .map_err(unreadable)?;
    if out.len() as u64 > cap {
        return Err(too_large());
    }
    Ok(Some(out))
}

/// What a paragraph is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Body,
    Heading(usize),
    Item(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Block {
    Paragraph(Style, String),
    Table(Vec<Vec<String>>),
}

/// The value of an element's `w:val` attribute.
fn val(e: &BytesStart) -> Option<String> {
    e.attributes()
        .flatten()
        .find(|a| a.key.as_ref() == "w:val")
        .map(|a| a.value.into_owned())
}

fn heading_level(style: &str) -> Option<usize> {
    if style.eq_ignore_ascii_case("title") {
        return Some(1);
    }
    let n = style
        .strip_prefix("Heading")
        .or_else(|| style.strip_prefix("heading"))?;
    n.trim().parse::<usize>().ok().map(|n| n.clamp(1, 6))
}

/// The body's paragraphs and tables, in order. A table inside a table's cell is read as the
/// cell's text.
fn blocks(xml: &[u8], budget: &Budget) -> Result<Vec<Block>, DocxError> {
    let mut reader = Reader::from_reader(xml);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let (mut style, mut para, mut in_text) = (Style::Body, String::new(), false);
    let mut tables = 0usize;
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut events = 0u64;
    loop {
        events += 1;
        if events.is_multiple_of(4096) {
            budget.check()?;
        }
        let event = reader.read_event_into(&mut buf).map_err(unreadable)?;
        match event {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => match e.name().as_ref() {
                "w:p" => {
                    style = Style::Body;
                    para.clear();
                }
                "w:pStyle" => {
                    if let Some(level) = val(&e).as_deref().and_then(heading_level) {
                        style = Style::Heading(level);
                    }
                }
                "w:ilvl" => {
                    let level = val(&e).and_then(|v| v.parse().ok()).unwrap_or(0usize);
                    style = Style::Item(level.min(8));
                }
                "w:numPr" if !matches!(style, Style::Item(_)) => style = Style::Item(0),
                "w:t" => in_text = true,
                "w:tab" => para.push(' '),
                "w:br" => para.push(' '),
                "w:tbl" => {
                    tables += 1;
                    if tables == 1 {
                        rows.clear();
                    }
                }
                "w:tr" if tables == 1 => rows.push(Vec::new()),
                "w:tc" if tables == 1 => {
                    if let Some(r) = rows.last_mut() {
                        r.push(String::new());
                    }
                }
                _ => {}
            },
            Event::Text(t) if in_text => para.push_str(&t),
            Event::GeneralRef(r) if in_text => {
                if let Some(c) = r.resolve_char_ref().map_err(unreadable)? {
                    para.push(c);
                } else {
                    para.push_str(match r.as_ref() {
                        "amp" => "&",
                        "lt" => "<",
                        "gt" => ">",
                        "quot" => "\"",
                        "apos" => "'",
                        _ => "",
                    });
                }
            }
            Event::End(e) => match e.name().as_ref() {
                "w:t" => in_text = false,
                "w:p" => {
                    let text = para.trim().to_string();
                    if tables > 0 {
                        if let Some(cell) = rows.last_mut().and_then(|r| r.last_mut()) {
                            if !cell.is_empty() && !text.is_empty() {
                                cell.push(' ');
                            }
                            cell.push_str(&text);
                        }
                    } else if !text.is_empty() {
                        out.push(Block::Paragraph(style, text));
                    }
                    para.clear();
                }
                "w:tbl" => {
                    tables = tables.saturating_sub(1);
                    if tables == 0 && !rows.is_empty() {
                        out.push(Block::Table(std::mem::take(&mut rows)));
                    }
                }
                _ => {}
            },
            _ => {}
        }
        buf.clear();
    }
    Ok(out)
}

/// Text that would read as Markdown syntax at a line's start is kept as text.
fn escape_start(s: &str) -> String {
    match s.chars().next() {
        Some('#' | '>' | '-' | '+' | '*' | '|') => format!("\\{s}"),
        _ => s.to_string(),
    }
}

fn markdown(blocks: &[Block]) -> String {
    let mut out = String::new();
    let mut previous_item = false;
    for b in blocks {
        let item = matches!(b, Block::Paragraph(Style::Item(_), _));
        if !out.is_empty() {
            out.push_str(if item && previous_item { "\n" } else { "\n\n" });
        }
        previous_item = item;
        match b {
            Block::Paragraph(Style::Heading(n), t) => {
                out.push_str(&format!("{} {t}", "#".repeat(*n)));
            }
            Block::Paragraph(Style::Item(level), t) => {
                out.push_str(&format!("{}- {t}", "  ".repeat(*level)));
            }
            Block::Paragraph(Style::Body, t) => out.push_str(&escape_start(t)),
            Block::Table(rows) => out.push_str(&table(rows)),
        }
    }
    out
}

/// A GFM table; its first row is the header.
fn table(rows: &[Vec<String>]) -> String {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let line = |cells: &[String]| {
        let mut l = String::from("|");
        for i in 0..width {
            let cell = cells.get(i).map(String::as_str).unwrap_or("");
            l.push_str(&format!(" {} |", cell.replace('|', "\\|")));
        }
        l
    };
    let mut lines = vec![line(&rows[0])];
    lines.push(format!("|{}", " --- |".repeat(width)));
    lines.extend(rows[1..].iter().map(|r| line(r)));
    lines.join("\n")
}

fn text(blocks: &[Block]) -> String {
    let parts: Vec<String> = blocks
        .iter()
        .map(|b| match b {
            Block::Paragraph(_, t) => t.clone(),
            Block::Table(rows) => rows
                .iter()
                .map(|r| r.join("\t"))
                .collect::<Vec<_>>()
                .join("\n"),
        })
        .collect();
    parts.join("\n\n")
}

/// The text of the first element `name` of the properties part, trimmed.
fn property(xml: &[u8], name: &str) -> Option<String> {
    let mut reader = Reader::from_reader(xml);
    let mut buf = Vec::new();
    let mut inside = false;
    let mut value = String::new();
    loop {
        match reader.read_event_into(&mut buf).ok()? {
            Event::Eof => return None,
            Event::Start(e) if e.name().as_ref() == name => inside = true,
            Event::Text(t) if inside => value.push_str(&t),
            Event::End(e) if e.name().as_ref() == name => {
                let v: String = value.trim().chars().take(1024).collect();
                return (!v.is_empty()).then_some(v);
            }
            _ => {}
        }
        buf.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"<w:document xmlns:w="w"><w:body>
        <w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Annual</w:t></w:r><w:r><w:t xml:space="preserve"> Review</w:t></w:r></w:p>
        <w:p><w:r><w:t>Fish &amp; chips</w:t></w:r></w:p>
        <w:p><w:pPr><w:numPr><w:ilvl w:val="0"/></w:numPr></w:pPr><w:r><w:t>One</w:t></w:r></w:p>
        <w:p><w:pPr><w:numPr><w:ilvl w:val="1"/></w:numPr></w:pPr><w:r><w:t>Two</w:t></w:r></w:p>
        <w:tbl><w:tr><w:tc><w:p><w:r><w:t>A</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>B|C</w:t></w:r></w:p></w:tc></w:tr>
        <w:tr><w:tc><w:p><w:r><w:t>1</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
        <w:p><w:r><w:t># not a heading</w:t></w:r></w:p>
        </w:body></w:document>"#;

    #[test]
    fn headings_lists_tables_and_text_become_markdown() {
        let b = blocks(BODY.as_bytes(), &Budget::unlimited()).unwrap();
        assert_eq!(
            markdown(&b),
            "# Annual Review\n\nFish & chips\n\n- One\n  - Two\n\n| A | B\\|C |\n| --- | --- |\n| 1 |  |\n\n\\# not a heading"
        );
        assert!(text(&b).contains("A\tB|C\n1"));
    }

    #[test]
    fn properties_are_read_from_core_xml() {
        let core = br#"<cp:coreProperties xmlns:dc="d"><dc:title> Report </dc:title><dc:creator>Ada</dc:creator></cp:coreProperties>"#;
        assert_eq!(property(core, "dc:title").as_deref(), Some("Report"));
        assert_eq!(property(core, "dc:creator").as_deref(), Some("Ada"));
        assert_eq!(property(core, "dc:subject"), None);
    }

    #[test]
    fn what_is_not_a_zip_is_unreadable() {
        assert!(matches!(
            read(b"PK\x03\x04 not really", &Budget::unlimited()),
            Err(DocxError::Unreadable(_))
        ));
    }
}
