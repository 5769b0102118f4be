//! PDFs for the fixture sites and uploads.

use lopdf::content::{Content, Operation};
use lopdf::{dictionary, Document, Object, Stream};

/// A PDF with one line of text on each page, and with `info` its title and author.
pub fn pdf(lines: &[&str], info: Option<(&str, &str)>) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
    });
    let resources_id = doc.add_object(dictionary! {
        "Font" => dictionary! { "F1" => font_id },
    });
    let mut kids = Vec::new();
    for line in lines {
        let content = Content {
            operations: vec![
                Operation::new("BT", vec![]),
                Operation::new("Tf", vec!["F1".into(), 24.into()]),
                Operation::new("Td", vec![72.into(), 700.into()]),
                Operation::new("Tj", vec![Object::string_literal(*line)]),
                Operation::new("ET", vec![]),
            ],
        };
        let content_id = doc.add_object(Stream::new(dictionary! {}, content.encode().unwrap()));
        let page_id = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
            "Resources" => resources_id, "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        });
        kids.push(Object::from(page_id));
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => count }),
    );
    let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog_id);
    if let Some((title, author)) = info {
        let info_id = doc.add_object(dictionary! {
            "Title" => Object::string_literal(title),
            "Author" => Object::string_literal(author),
        });
        doc.trailer.set("Info", info_id);
    }
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

/// [`pdf`] of `lines` with a stream of `pad` bytes no page shows, to make it big.
pub fn pdf_padded(lines: &[&str], pad: usize) -> Vec<u8> {
    let mut doc = Document::load_mem(&pdf(lines, None)).unwrap();
    let mut stream = Stream::new(dictionary! {}, vec![b'x'; pad]);
    stream.allows_compression = false;
    doc.add_object(stream);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}
