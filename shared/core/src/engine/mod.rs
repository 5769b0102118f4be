//! The fetch and extraction engine: one guarded HTTP client, robots.txt, sitemaps, URL rules
//! and HTML to Markdown/text extraction.

pub mod budget;
pub mod diff;
pub mod docx;
pub mod extract;
pub mod fetch;
pub mod guard;
pub mod html;
pub mod llm;
pub mod pdf;
pub mod pool;
pub mod robots;
pub mod search;
pub mod sitemap;
pub mod urls;
