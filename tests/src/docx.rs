//! Word documents for the fixture sites.

use std::io::Write;
use zip::write::SimpleFileOptions;

fn para(style: Option<&str>, numbered: bool, text: &str) -> String {
    let mut props = String::new();
    if let Some(s) = style {
        props.push_str(&format!(r#"<w:pStyle w:val="{s}"/>"#));
    }
    if numbered {
        props.push_str(r#"<w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr>"#);
    }
    format!(r#"<w:p><w:pPr>{props}</w:pPr><w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p>"#)
}

fn cell(text: &str) -> String {
    format!("<w:tc>{}</w:tc>", para(None, false, text))
}

/// The Markdown of [`docx`].
pub const DOCX_MARKDOWN: &str =
    "# Annual Review\n\n## Highlights\n\n- First point\n- Second point\n\n\
     | Metric | Value |\n| --- | --- |\n| Revenue | 42 |\n\nClosing words & thanks.";

/// A `.docx` with a title and a heading, a list of two items, a two-by-two table and a closing
/// paragraph, titled "Annual Review" by "Ada Lovelace".
pub fn docx() -> Vec<u8> {
    let body = [
        para(Some("Heading1"), false, "Annual Review"),
        para(Some("Heading2"), false, "Highlights"),
        para(Some("ListParagraph"), true, "First point"),
        para(Some("ListParagraph"), true, "Second point"),
        format!(
            "<w:tbl><w:tr>{}{}</w:tr><w:tr>{}{}</w:tr></w:tbl>",
            cell("Metric"),
            cell("Value"),
            cell("Revenue"),
            cell("42")
        ),
        para(None, false, "Closing words &amp; thanks."),
    ]
    .concat();
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>"#
    );
    let core = r#"<?xml version="1.0" encoding="UTF-8"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Annual Review</dc:title><dc:creator>Ada Lovelace</dc:creator></cp:coreProperties>"#;
    zipped(&[
        (
            "[Content_Types].xml",
            br#"<?xml version="1.0"?><Types/>"#.to_vec(),
        ),
        ("word/document.xml", document.into_bytes()),
        ("docProps/core.xml", core.as_bytes().to_vec()),
    ])
}

/// A zip named like a `.docx` whose body inflates to `mib` MiB.
pub fn docx_bomb(mib: usize) -> Vec<u8> {
    let mut body = b"<w:document><w:body>".to_vec();
    body.resize(mib << 20, b' ');
    zipped(&[("word/document.xml", body)])
}

fn zipped(parts: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in parts {
        zip.start_file(*name, options).expect("a zip entry");
        zip.write_all(bytes).expect("zip bytes");
    }
    zip.finish().expect("a zip").into_inner()
}
