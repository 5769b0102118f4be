//! The text of a PDF's pages, within bounds. A small PDF can inflate to gigabytes (a page stream
//! of 255 MiB of text operators, or 200 pages that share it) and load millions of objects, so:
//! loading stops at [`MAX_OBJECTS`] objects or the budget's deadline, each stream inflates to at
//! most [`MAX_STREAM`] bytes, the page contents of a document to [`MAX_DECODED`] bytes in all and
//! [`MAX_OPERATORS`] content operators, and the text kept to [`MAX_TEXT`] bytes.

use super::budget::{Budget, Exceeded};
use lopdf::{Document, LoadOptions, Object, ObjectId};
use std::cell::Cell;
use std::time::Instant;

/// Most bytes one stream may inflate to.
pub const MAX_STREAM: usize = 16 * 1024 * 1024;
/// Most bytes the page contents of one document may inflate to, all pages together.
pub const MAX_DECODED: usize = 64 * 1024 * 1024;
/// Most content operators read from one document.
pub const MAX_OPERATORS: usize = 2_000_000;
/// Most objects loaded from one document.
pub const MAX_OBJECTS: usize = 500_000;
/// Most text kept from one document.
pub const MAX_TEXT: usize = 32 * 1024 * 1024;

/// Why a PDF yields no text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PdfError {
    /// It is not a PDF this reader understands.
    #[error("the PDF cannot be read: {0}")]
    Unreadable(String),
    #[error(transparent)]
    Exceeded(#[from] Exceeded),
}

/// What the object filter of the load running on this thread may still take.
#[derive(Clone, Copy)]
struct Loading {
    deadline: Instant,
    objects_left: usize,
    over: Option<Over>,
}

#[derive(Clone, Copy)]
enum Over {
    Time,
    Objects,
}

thread_local! {
    static LOADING: Cell<Option<Loading>> = const { Cell::new(None) };
}

/// lopdf's per-object load filter: keeps objects while the load is within its bounds, and
/// drops every later one (an object stream dropped is never inflated) once it is not. lopdf
/// keeps its own copy of a top-level object and the returned one of an object-stream member;
/// streams are never members, so only other objects are copied.
fn keep(id: ObjectId, object: &mut Object) -> Option<(ObjectId, Object)> {
    LOADING.with(|cell| {
        let mut state = cell.get()?;
        if state.over.is_none() {
            if Instant::now() >= state.deadline {
                state.over = Some(Over::Time);
            } else if state.objects_left == 0 {
                state.over = Some(Over::Objects);
            } else {
                state.objects_left -= 1;
            }
        }
        cell.set(Some(state));
        state.over.is_none().then(|| match object {
            Object::Stream(_) => (id, Object::Null),
            other => (id, other.clone()),
        })
    })
}

/// Loads a document within the object cap and the budget.
fn load(bytes: &[u8], budget: &Budget) -> Result<Document, PdfError> {
    LOADING.with(|c| {
        c.set(Some(Loading {
            deadline: Instant::now() + budget.remaining(),
            objects_left: MAX_OBJECTS,
            over: None,
        }))
    });
    let options = LoadOptions {
        filter: Some(keep),
        max_decompressed_size: Some(MAX_STREAM),
        ..LoadOptions::default()
    };
    let loaded = Document::load_mem_with_options(bytes, options);
    let state = LOADING.with(|c| c.take());
    match state.and_then(|s| s.over) {
        Some(Over::Time) => return Err(budget.timeout().into()),
        Some(Over::Objects) => {
            return Err(Exceeded::TooComplex(format!(
                "the PDF has more than {MAX_OBJECTS} objects"
            ))
            .into())
        }
        None => {}
    }
    loaded.map_err(|e| match e {
        lopdf::Error::Decompress(lopdf::DecompressError::MemoryLimitExceeded { .. }) => {
            too_large_stream().into()
        }
        e => PdfError::Unreadable(e.to_string()),
    })
}

fn too_large_stream() -> Exceeded {
    Exceeded::TooLarge(format!(
        "a stream of the PDF inflates to more than {} MiB",
        MAX_STREAM >> 20
    ))
}

/// What a PDF says: its pages' text, in page order, and its declared title and author.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PdfText {
    pub pages: Vec<String>,
    pub title: Option<String>,
    pub author: Option<String>,
}

/// Reads a PDF within bounds.
pub fn read(bytes: &[u8], budget: &Budget) -> Result<PdfText, PdfError> {
    let doc = load(bytes, budget)?;
    let pages = page_texts(&doc, budget)?;
    Ok(PdfText {
        pages,
        title: info(&doc, b"Title"),
        author: info(&doc, b"Author"),
    })
}

/// A text entry of the document's information dictionary (UTF-16 with its byte-order mark, or
/// PDFDocEncoding, read here as Latin-1), trimmed; `None` when absent or empty.
fn info(doc: &Document, key: &[u8]) -> Option<String> {
    let dict = match doc.trailer.get(b"Info").ok()? {
        Object::Reference(id) => doc.get_dictionary(*id).ok()?,
        Object::Dictionary(d) => d,
        _ => return None,
    };
    let Object::String(bytes, _) = dict.get(key).ok()? else {
        return None;
    };
    let text = match bytes.strip_prefix(&[0xFE, 0xFF]) {
        Some(utf16) => {
            let units: Vec<u16> = utf16
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16_lossy(&units)
        }
        None => bytes.iter().map(|&b| b as char).collect(),
    };
    let text: String = text.trim().chars().take(1024).collect();
    (!text.is_empty()).then_some(text)
}

/// The text of each page, in page order.
fn page_texts(doc: &Document, budget: &Budget) -> Result<Vec<String>, PdfError> {
    let mut decoded = 0usize;
    let mut operators = 0usize;
    let mut kept = 0usize;
    let mut pages = Vec::new();
    for (number, id) in doc.get_pages() {
        budget.check()?;
        let left = MAX_DECODED.saturating_sub(decoded).min(MAX_STREAM);
        let content = doc
            .get_page_content_with_limit(id, left)
            .map_err(|_| too_large_content())?;
        decoded += content.len();
        operators += count_operators(&content, MAX_OPERATORS - operators);
        if operators > MAX_OPERATORS {
            return Err(Exceeded::TooComplex(format!(
                "the PDF has more than {MAX_OPERATORS} content operators"
            ))
            .into());
        }
        budget.check()?;
        // The page's content was measured above; its text is read within the same bound.
        let text = doc
            .extract_text_with_limit(&[number], left.max(1))
            .unwrap_or_default();
        let text = text.trim().to_string();
        kept += text.len();
        if kept > MAX_TEXT {
            return Err(Exceeded::TooLarge(format!(
                "the PDF's text is longer than {} MiB",
                MAX_TEXT >> 20
            ))
            .into());
        }
        pages.push(text);
    }
    Ok(pages)
}

fn too_large_content() -> Exceeded {
    Exceeded::TooLarge(format!(
        "the PDF's page contents inflate to more than {} MiB",
        MAX_DECODED >> 20
    ))
}

fn is_delimiter(b: u8) -> bool {
    matches!(
        b,
        b'(' | b')' | b'<' | b'>' | b'[' | b']' | b'{' | b'}' | b'/' | b'%'
    )
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'\x0c' | b'\0')
}

/// Counts the operators of a content stream (stopping once past `cap`) without building them:
/// strings, names, numbers, arrays and dictionaries are operands; any other word is an
/// operator. Inline image data (`ID` ... `EI`) is skipped.
fn count_operators(content: &[u8], cap: usize) -> usize {
    let (mut i, mut n) = (0, 0);
    let len = content.len();
    while i < len && n <= cap {
        let b = content[i];
        if is_space(b) || matches!(b, b'[' | b']' | b'{' | b'}') {
            i += 1;
        } else if b == b'%' {
            while i < len && !matches!(content[i], b'\r' | b'\n') {
                i += 1;
            }
        } else if b == b'(' {
            let mut depth = 0usize;
            while i < len {
                match content[i] {
                    b'\\' => i += 1,
                    b'(' => depth += 1,
                    b')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            i += 1;
        } else if b == b'<' || b == b'>' {
            // `<<` and `>>` delimit dictionaries; a single `<` opens a hex string.
            if b == b'<' && content.get(i + 1) != Some(&b'<') {
                while i < len && content[i] != b'>' {
                    i += 1;
                }
            }
            i += if content.get(i + 1) == Some(&b) { 2 } else { 1 };
        } else {
            let start = i;
            i += 1;
            while i < len && !is_space(content[i]) && !is_delimiter(content[i]) {
                i += 1;
            }
            let word = &content[start..i];
            let operand = b == b'/'
                || b == b')'
                || word
                    .iter()
                    .all(|c| c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.'))
                || word == b"true"
                || word == b"false"
                || word == b"null";
            if !operand {
                n += 1;
                if word == b"ID" {
                    i = end_of_inline_image(content, i);
                }
            }
        }
    }
    n
}

/// Where the data of an inline image that starts at `from` ends: after its `EI`.
fn end_of_inline_image(content: &[u8], from: usize) -> usize {
    let mut i = from;
    while i + 2 <= content.len() {
        if &content[i..i + 2] == b"EI"
            && i > 0
            && is_space(content[i - 1])
            && content.get(i + 2).is_none_or(|&c| is_space(c))
        {
            return i + 2;
        }
        i += 1;
    }
    content.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_are_counted_not_operands() {
        let content = b"BT /F1 12 Tf 72 712 Td (Hello (nested) \\) world) Tj [(a) -20 (b)] TJ ET \
                        q 1 0 0 1 0 0 cm BI /W 1 /H 1 ID \x00EI\xff EI Q % a comment Tj\n<</A 1>> BDC EMC";
        // BT Tf Td Tj TJ ET q cm BI ID Q BDC EMC
        assert_eq!(count_operators(content, usize::MAX), 13);
        assert_eq!(count_operators(b"q Q q Q q Q", 2), 3);
    }
}

#[cfg(test)]
mod bombs {
    use super::*;
    use lopdf::{dictionary, Document, Object, Stream};
    use std::io::Write;

    /// A PDF of `pages` pages that all show one stream inflating to `inflated` bytes.
    fn sharing(inflated: usize, pages: usize) -> Vec<u8> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        let chunk = "BT /F1 9 Tf (aaaaaaaa) Tj ET\n".repeat(1 << 12);
        let mut left = inflated;
        while left > 0 {
            let n = left.min(chunk.len());
            z.write_all(&chunk.as_bytes()[..n]).unwrap();
            left -= n;
        }
        let mut doc = Document::with_version("1.5");
        let pages_id = doc.new_object_id();
        let mut stream = Stream::new(dictionary! {"Filter" => "FlateDecode"}, z.finish().unwrap());
        stream.allows_compression = false;
        let content = doc.add_object(stream);
        let kids: Vec<Object> = (0..pages)
            .map(|_| {
                doc.add_object(
                    dictionary! {"Type" => "Page", "Parent" => pages_id, "Contents" => content},
                )
                .into()
            })
            .collect();
        doc.objects.insert(
            pages_id,
            Object::Dictionary(
                dictionary! {"Type" => "Pages", "Kids" => kids, "Count" => pages as i64},
            ),
        );
        let catalog = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => pages_id});
        doc.trailer.set("Root", catalog);
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap();
        out
    }

    #[test]
    fn a_stream_bomb_and_pages_sharing_it_are_refused() {
        let one = sharing(255 << 20, 1);
        let r = read(&one, &Budget::unlimited());
        assert!(
            matches!(r, Err(PdfError::Exceeded(Exceeded::TooLarge(_)))),
            "{r:?}"
        );
        // 200 pages of 1 MiB each: within every page's bound, over the document's.
        let many = sharing(1 << 20, 200);
        let r = read(&many, &Budget::unlimited());
        assert!(matches!(r, Err(PdfError::Exceeded(_))), "{r:?}");
        // A small one reads.
        let small = sharing(100, 3);
        assert_eq!(read(&small, &Budget::unlimited()).unwrap().pages.len(), 3);
    }

    #[test]
    fn title_and_author_come_from_the_information_dictionary() {
        let mut doc = lopdf::Document::load_mem(&sharing(100, 1)).unwrap();
        let title: Vec<u8> = [0xFE, 0xFF]
            .into_iter()
            .chain("Prüfbericht".encode_utf16().flat_map(u16::to_be_bytes))
            .collect();
        let info = doc.add_object(dictionary! {
            "Title" => Object::String(title, lopdf::StringFormat::Hexadecimal),
            "Author" => Object::string_literal("  Ada Lovelace "),
        });
        doc.trailer.set("Info", info);
        let mut bytes = Vec::new();
        doc.save_to(&mut bytes).unwrap();
        let text = read(&bytes, &Budget::unlimited()).unwrap();
        assert_eq!(text.title.as_deref(), Some("Prüfbericht"));
        assert_eq!(text.author.as_deref(), Some("Ada Lovelace"));
        assert_eq!(
            read(&sharing(100, 1), &Budget::unlimited()).unwrap().title,
            None
        );
    }
}
