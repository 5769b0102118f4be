//! Extraction alone, on one thread: reads every `.html` (and `.htm`) file under a directory and
//! extracts Markdown, links and metadata from each as a crawl does, `ROUNDS` times (default 3), and
//! prints the CPU per page of parse, links and Markdown. Steadier than a whole crawl for
//! comparing two versions of the extraction code.
//!
//!   cargo run --release -p sarvcrawl-core --example extract_pages -- DIR

use sarvcrawl_core::engine::budget::Budget;
use sarvcrawl_core::engine::extract::{extract_html, ExtractOptions};
use sarvcrawl_core::stages::{self, Stage};
use std::path::Path;

mod common;
use common::html_files;

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: extract_pages DIR");
        std::process::exit(2);
    };
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let mut files = Vec::new();
    html_files(Path::new(&dir), &mut files);
    files.sort();
    let pages: Vec<(String, String)> = files
        .iter()
        .filter_map(|p| std::fs::read(p).ok().map(|b| (p.display().to_string(), b)))
        .map(|(p, b)| (p, String::from_utf8_lossy(&b).into_owned()))
        .collect();
    let Ok(base) = url::Url::parse("http://127.0.0.1/") else {
        return;
    };
    let opts = ExtractOptions {
        markdown: true,
        declared: true,
        ..Default::default()
    };
    stages::enable();
    let mut markdown_bytes = 0;
    for _ in 0..rounds {
        for (path, source) in &pages {
            let Ok(url) = base.join(path.trim_start_matches('/')) else {
                continue;
            };
            let _parse = stages::enter(Some(Stage::Parse));
            if let Ok(e) = extract_html(source, &url, &opts, &Budget::unlimited()) {
                markdown_bytes += e.markdown.map_or(0, |m| m.len());
            }
        }
    }
    let n = (pages.len() * rounds).max(1);
    println!(
        "{} pages x {rounds} rounds, {} KB of Markdown a page",
        pages.len(),
        markdown_bytes / n / 1024
    );
    if let Some(report) = stages::report() {
        println!("CPU seconds by stage (all pages, all rounds): {report}");
    }
    for (name, secs) in stages::totals() {
        if secs > 0.0 {
            println!("  {name:<10} {:.3} ms a page", secs * 1000.0 / n as f64);
        }
    }
}
