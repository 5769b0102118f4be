//! Sitemaps (sitemaps.org): URL sets and indexes, plain or gzipped.

use flate2::read::GzDecoder;
use std::io::Read;

/// What a sitemap document lists.
#[derive(Debug, PartialEq, Eq)]
pub enum Sitemap {
    /// Page URLs.
    Urls(Vec<String>),
    /// Further sitemaps.
    Index(Vec<String>),
}

/// Decoded sitemaps larger than this are cut off, as pages are (the fetcher's body cap).
pub const MAX_DECODED: u64 = 10 * 1024 * 1024;

/// Parses a sitemap, gunzipping it first when it is gzip.
pub fn parse(body: &[u8]) -> Sitemap {
    let text = if body.starts_with(&[0x1f, 0x8b]) {
        let mut out = String::new();
        // A truncated or corrupt archive yields what decoded before the fault.
        let _ = GzDecoder::new(body)
            .take(MAX_DECODED)
            .read_to_string(&mut out);
        out
    } else {
        String::from_utf8_lossy(body).into_owned()
    };
    let locs = locs(&text);
    if text.contains("<sitemapindex") {
        Sitemap::Index(locs)
    } else {
        Sitemap::Urls(locs)
    }
}

fn locs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<loc>") {
        rest = &rest[start + 5..];
        let Some(end) = rest.find("</loc>") else {
            break;
        };
        let raw = rest[..end].trim();
        let raw = raw
            .strip_prefix("<![CDATA[")
            .and_then(|r| r.strip_suffix("]]>"))
            .unwrap_or(raw);
        out.push(unescape(raw.trim()));
        rest = &rest[end + 6..];
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{write::GzEncoder, Compression};
    use std::io::Write;

    #[test]
    fn url_sets_and_indexes() {
        let set = r#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
            <url><loc> https://e.com/a?x=1&amp;y=2 </loc></url><url><loc><![CDATA[https://e.com/b]]></loc></url></urlset>"#;
        assert_eq!(
            parse(set.as_bytes()),
            Sitemap::Urls(vec![
                "https://e.com/a?x=1&y=2".into(),
                "https://e.com/b".into()
            ])
        );
        let index =
            r#"<sitemapindex><sitemap><loc>https://e.com/s1.xml.gz</loc></sitemap></sitemapindex>"#;
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(index.as_bytes()).unwrap();
        assert_eq!(
            parse(&gz.finish().unwrap()),
            Sitemap::Index(vec!["https://e.com/s1.xml.gz".into()])
        );
    }

    #[test]
    fn gzipped_sitemaps_inflate_no_further_than_a_page() {
        let mut gz = GzEncoder::new(Vec::new(), Compression::best());
        gz.write_all(b"<urlset><url><loc>https://e.com/first</loc></url>")
            .unwrap();
        gz.write_all(&vec![b' '; 30 << 20]).unwrap();
        gz.write_all(b"<url><loc>https://e.com/past-the-cap</loc></url></urlset>")
            .unwrap();
        assert_eq!(
            parse(&gz.finish().unwrap()),
            Sitemap::Urls(vec!["https://e.com/first".into()])
        );
    }
}
