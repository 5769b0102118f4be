//! Real pages through the service's parser and through html5ever alone: reads every `.html`
//! file under the directories given, and prints how many pages each way of parsing took (the
//! tree built directly, the simple tokenizer with html5ever's tree builder, html5ever alone)
//! and every page whose tree differs from html5ever's (none should).
//!
//!   cargo run --release -p sarvcrawl-core --example compare_trees -- DIR...

use sarvcrawl_core::engine::budget::Budget;
use sarvcrawl_core::engine::html::{outline, parse_by, Parser};
use scraper::Html;
use std::path::Path;

mod common;
use common::html_files;

fn main() {
    let mut files = Vec::new();
    for dir in std::env::args().skip(1) {
        html_files(Path::new(&dir), &mut files);
    }
    if files.is_empty() {
        eprintln!("usage: compare_trees DIR...  (no .html file found)");
        std::process::exit(2);
    }
    let (mut direct, mut simple, mut any, mut differ, mut refused) = (0, 0, 0, 0, 0);
    for path in &files {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        let source = String::from_utf8_lossy(&bytes);
        match parse_by(&source, &Budget::unlimited()) {
            Ok((html, parser)) => {
                match parser {
                    Parser::Direct => direct += 1,
                    Parser::Simple => simple += 1,
                    Parser::Html5ever => any += 1,
                }
                if outline(&html) != outline(&Html::parse_document(&source)) {
                    differ += 1;
                    println!("differs ({parser:?}): {}", path.display());
                }
            }
            Err(e) => {
                refused += 1;
                println!("refused ({e:?}): {}", path.display());
            }
        }
    }
    println!(
        "{} pages: {direct} built directly, {simple} by the simple tokenizer and html5ever's \
         tree builder, {any} by html5ever alone, {refused} refused; {differ} trees differ \
         from html5ever's",
        files.len()
    );
    if differ > 0 {
        std::process::exit(1);
    }
}
