use super::*;
use crate::engine::pool::WorkPool;
use std::time::{Duration, Instant};

fn md(html: &str, only_main: bool) -> String {
    let opts = ExtractOptions {
        only_main_content: only_main,
        markdown: true,
        ..Default::default()
    };
    let url = Url::parse("https://example.com/docs/page").unwrap();
    extract_html(html, &url, &opts, &Budget::unlimited())
        .unwrap()
        .markdown
        .unwrap()
}

#[test]
fn headings_paragraphs_emphasis_links() {
    let out = md(
        r#"<h1>Title</h1><p>Some <b>bold</b> and <em> spaced </em>text with a
        <a href="/x#frag">link</a>.</p><p>snake_case and _under_ and *star*</p>"#,
        true,
    );
    assert_eq!(
        out,
        "# Title\n\nSome **bold** and *spaced* text with a [link](https://example.com/x).\n\n\
         snake_case and \\_under\\_ and \\*star\\*"
    );
}

#[test]
fn code_blocks_keep_code_verbatim() {
    let out = md(
        "<pre>fn main() {\n    let a = 1 * 2; // &lt;x&gt;\n}\n</pre>\
         <pre><code class=\"language-rust\">let s = \"```\";\n\n\nend</code></pre>\
         <p>Inline <code>a_b *c*</code>.</p>",
        true,
    );
    assert_eq!(
        out,
        "```\nfn main() {\n    let a = 1 * 2; // <x>\n}\n```\n\n\
         ````rust\nlet s = \"```\";\n\n\nend\n````\n\n\
         Inline `a_b *c*`."
    );
}

#[test]
fn gfm_tables_and_lists() {
    let out = md(
        "<table><thead><tr><th>Name</th><th>Value</th></tr></thead>\
         <tbody><tr><td>a|b</td><td><b>1</b></td></tr><tr><td>c</td></tr></tbody></table>\
         <ul><li>one</li><li>two<ul><li>nested</li></ul></li></ul><ol start=\"3\"><li>x</li><li>y</li></ol>",
        true,
    );
    assert_eq!(
        out,
        "| Name | Value |\n| --- | --- |\n| a\\|b | **1** |\n| c |  |\n\n\
         - one\n- two\n  - nested\n\n3. x\n4. y"
    );
}

#[test]
fn scripts_styles_and_chrome_are_dropped() {
    let html = "<html lang=en><head><title> T </title><style>.a{}</style></head><body>\
        <nav>Menu</nav><header>Head</header><script>var x=1;</script>\
        <main><p>Body text</p><aside>Side</aside></main><footer>Foot</footer></body></html>";
    assert_eq!(md(html, true), "Body text");
    let full = md(html, false);
    assert!(full.contains("Menu") && full.contains("Foot") && full.contains("Body text"));
    assert!(!full.contains("var x") && !full.contains(".a{}"));
}

#[test]
fn selectors_metadata_links_text_html() {
    let html = r#"<html lang="de"><head><title>Page</title>
        <meta name="description" content="About  it">
        <link rel="canonical" href="/canon"><base href="https://example.com/base/"></head>
        <body><div id="keep"><p>Kept <a href="rel" onclick="x()">r</a></p><p class="ad">Ad</p></div>
        <div>Other</div><a href="mailto:a@b">m</a><a href="https://other.org/#x">o</a>
        <a href="rel">dup</a></body></html>"#;
    let url = Url::parse("https://example.com/page").unwrap();
    let opts = ExtractOptions {
        only_main_content: true,
        markdown: true,
        text: true,
        html: true,
        ..Default::default()
    }
    .with_selectors(&["#keep".into()], &[".ad".into()]);
    let e = extract_html(html, &url, &opts, &Budget::unlimited()).unwrap();
    assert_eq!(e.title.as_deref(), Some("Page"));
    assert_eq!(e.description.as_deref(), Some("About it"));
    assert_eq!(e.language.as_deref(), Some("de"));
    assert_eq!(
        e.canonical_url.as_deref(),
        Some("https://example.com/canon")
    );
    let links: Vec<_> = e.links.iter().map(Url::as_str).collect();
    assert_eq!(
        links,
        ["https://example.com/base/rel", "https://other.org/"]
    );
    assert_eq!(
        e.markdown.as_deref(),
        Some("Kept [r](https://example.com/base/rel)")
    );
    assert_eq!(e.text.as_deref(), Some("Kept r"));
    assert_eq!(
        e.html.as_deref(),
        Some(r#"<div><p>Kept <a href="https://example.com/base/rel">r</a></p></div>"#)
    );
}

fn every_format() -> ExtractOptions {
    ExtractOptions {
        only_main_content: false,
        markdown: true,
        text: true,
        html: true,
        ..Default::default()
    }
}

/// Extracts on a work thread, as the service does.
fn on_pool(html: String, limit: Duration) -> Result<Extracted, Exceeded> {
    let pool = WorkPool::new(1);
    let url = Url::parse("https://example.com/").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(pool.run(limit, move |b| {
        extract_html(&html, &url, &every_format(), b)
    }))
}

#[test]
fn nesting_at_the_limit_is_extracted_within_bounds() {
    let depth = crate::engine::html::MAX_DEPTH - 20;
    // Each opening adds this many levels (a table's body is implied).
    for (open, close, levels) in [
        ("<div>", "</div>", 1),
        ("<blockquote>", "</blockquote>", 1),
        ("<ul><li>", "</li></ul>", 2),
        ("<table><tr><td>", "</td></tr></table>", 4),
        ("<b><a href=\"/x\">", "</a></b>", 2),
    ] {
        let html = format!(
            "<html><body>{}deep text{}</body></html>",
            open.repeat(depth / levels),
            close.repeat(depth / levels)
        );
        let t = Instant::now();
        let e = on_pool(html, Duration::from_secs(30)).unwrap();
        assert!(e.markdown.unwrap().contains("deep text"), "{open}");
        assert!(e.html.unwrap().contains("deep text"), "{open}");
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{open}: {:?}",
            t.elapsed()
        );
    }
}

#[test]
fn output_that_grows_faster_than_its_input_is_refused() {
    // Every line sits 160 lists deep: re-indenting it at each level is quadratic work.
    let lines = "<p>a line of text</p>".repeat(40_000);
    let html = format!(
        "<html><body>{}{lines}{}</body></html>",
        "<ul><li>".repeat(160),
        "</li></ul>".repeat(160)
    );
    let r = on_pool(html, Duration::from_secs(30));
    assert!(matches!(r, Err(Exceeded::TooLarge(_))), "{r:?}");
    // One short row and one row of 20,000 cells: every row is padded to the widest.
    let html = format!(
        "<table>{}<tr>{}</tr></table>",
        "<tr><td>x</td></tr>".repeat(20_000),
        "<td>y</td>".repeat(20_000)
    );
    let r = on_pool(html, Duration::from_secs(30));
    assert!(matches!(r, Err(Exceeded::TooLarge(_))), "{r:?}");
    // A short relative link made absolute against a long base, a million times over.
    let html = format!(
        "<base href=\"https://example.com/{}/\">{}",
        "p".repeat(2000),
        "<a href=?>x</a>".repeat(60_000)
    );
    let r = on_pool(html, Duration::from_secs(30));
    assert!(matches!(r, Err(Exceeded::TooLarge(_))), "{r:?}");
}

#[test]
fn ampersands_without_semicolons_take_linear_time() {
    // 5 MB of `&amp;`: each `&` of the text is checked for an entity after it, which once
    // searched the rest of the text for a `;` (past the 10 s the work may take; a release
    // build took 9 s for half as many). Now about a second.
    let n = 1_000_000;
    let html = format!(
        "<p>{}</p><p>a &amp;lt; b &amp;#60; c</p>",
        "&amp;".repeat(n)
    );
    let e = on_pool(html, Duration::from_secs(10)).unwrap();
    let md = e.markdown.unwrap();
    assert!(md.starts_with(&"&".repeat(n)), "{}", &md[..40]);
    // What would read as an entity is still escaped.
    assert!(
        md.ends_with("a \\&lt; b \\&#60; c"),
        "{}",
        &md[md.len() - 40..]
    );
}

#[test]
fn extraction_stops_at_its_deadline() {
    let html = format!(
        "<html><body>{}</body></html>",
        "<p>some <b>text</b></p>".repeat(50_000)
    );
    let r = on_pool(html, Duration::from_millis(1));
    assert!(matches!(r, Err(Exceeded::Time(_))), "{r:?}");
}

#[test]
fn a_page_gives_its_first_ten_thousand_links() {
    let html: String = (0..12_000)
        .map(|i| format!("<a href=\"/p{i}\">{i}</a>"))
        .collect();
    let opts = ExtractOptions::default();
    let url = Url::parse("https://example.com/").unwrap();
    let e = extract_html(&html, &url, &opts, &Budget::unlimited()).unwrap();
    assert_eq!(e.links.len(), MAX_LINKS);
    assert_eq!(e.links[0].as_str(), "https://example.com/p0");
}

#[test]
fn the_links_kept_for_the_markdown_are_bounded() {
    // 50,000 distinct hrefs that all resolve to the page itself, then one more link.
    let mut html: String = (0..50_000)
        .map(|i| format!("<a href=\"#f{i}\">x</a>"))
        .collect();
    html.push_str("<p><a href=\"/last\">last</a></p>");
    let doc = Html::parse_document(&html);
    let url = Url::parse("https://example.com/").unwrap();
    let budget = Budget::unlimited();
    let meter = Meter::new(&budget);
    let (resolver, out) = links_and_metadata(&doc, &url, false, &meter);
    assert_eq!(resolver.known.len(), MAX_LINKS);
    let found: Vec<&str> = out.links.iter().map(Url::as_str).collect();
    assert_eq!(found, ["https://example.com/", "https://example.com/last"]);
    // A link past the kept ones is still written, resolved again.
    assert!(md(&html, false).contains("[last](https://example.com/last)"));
}

/// Round trips: the text a CommonMark reader finds in the Markdown is the text of the HTML.
mod round_trip {
    use super::*;
    use pulldown_cmark::{Event, Options, Parser};

    /// The text a CommonMark (GFM tables, strikethrough) reader sees: every text and code span.
    fn markdown_text(md: &str) -> String {
        let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
        Parser::new_ext(md, opts)
            .filter_map(|e| match e {
                Event::Text(t) | Event::Code(t) => Some(t.into_string()),
                _ => None,
            })
            .collect()
    }

    /// The text of a document's body as a browser shows it.
    fn html_text(html: &str) -> String {
        let doc = Html::parse_document(html);
        let body = Selector::parse("body").unwrap();
        doc.select(&body).flat_map(|b| b.text()).collect()
    }

    fn squeeze(s: &str) -> String {
        s.chars().filter(|c| !c.is_whitespace()).collect()
    }

    fn markdown(html: &str) -> String {
        let opts = ExtractOptions {
            markdown: true,
            ..Default::default()
        };
        let url = Url::parse("https://example.com/").unwrap();
        extract_html(html, &url, &opts, &Budget::unlimited())
            .unwrap()
            .markdown
            .unwrap()
    }

    fn assert_round_trip(html: &str) {
        let md = markdown(html);
        assert_eq!(
            squeeze(&markdown_text(&md)),
            squeeze(&html_text(html)),
            "\nHTML: {html}\nMarkdown:\n{md}\n"
        );
    }

    #[test]
    fn text_that_looks_like_markdown_stays_text() {
        for html in [
            "<p># not a heading</p>",
            "<p>1. not a list</p><p>2) nor this</p>",
            "<p>- nor</p><p>+ this</p><p>&gt; nor a quote</p>",
            "<p>&lt;div&gt;not html&lt;/div&gt; &amp;lt; stays</p>",
            "<p>a|b</p><p>| x | y |<br>| --- | --- |</p>",
            "<p>===</p><p>---</p><p>***</p><p>~~~</p>",
            "<p>~~not struck~~ and *not em* and _nor this_ and `not code`</p>",
            "<p>first line<br>second line</p>",
            "<p>x<b>\"quoted\"</b>y and <b>Note:</b> text and a<em>(aside)</em>b</p>",
            "<ul><li>1. item text</li><li># item</li></ul>",
            "<blockquote><p>&gt; quoted marker</p></blockquote>",
            "<p><a href=\"/a(b)c\">paren link</a> and <a href=\"/x y\">space</a></p>",
        ] {
            assert_round_trip(html);
        }
    }

    #[test]
    fn a_line_break_is_a_hard_break() {
        let md = markdown("<p>one<br>two</p>");
        assert_eq!(md, "one\\\ntwo");
        let html = pulldown_cmark::html::push_html;
        let mut out = String::new();
        html(&mut out, Parser::new(&md));
        assert!(out.contains("<br"), "{out}");
    }

    /// A small deterministic generator of hostile-looking documents.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[(self.next() % from.len() as u64) as usize]
        }

        fn text(&mut self) -> String {
            const TOKENS: &[&str] = &[
                "word",
                "snake_case",
                "# ",
                "1. ",
                "2) ",
                "- ",
                "+ ",
                "&gt; ",
                "&lt;div&gt;",
                "&amp;lt;",
                "&amp;",
                "a|b",
                "===",
                "---",
                "*",
                "_",
                "`",
                "[x]",
                "(y)",
                "\\\\",
                "~~",
                "!",
                "\"q\"",
                ":",
                "**",
                "&lt;!--",
                "http://e.com/",
                " ",
                " ",
                "  ",
            ];
            (0..1 + self.next() % 6)
                .map(|_| self.pick(TOKENS))
                .collect()
        }

        fn inline(&mut self, depth: u32) -> String {
            let mut out = String::new();
            for _ in 0..1 + self.next() % 4 {
                match (depth, self.next() % 8) {
                    (0, _) | (_, 0..=3) => out.push_str(&self.text()),
                    (_, 4) => out.push_str(&format!("<b>{}</b>", self.inline(depth - 1))),
                    (_, 5) => out.push_str(&format!("<em>{}</em>", self.inline(depth - 1))),
                    (_, 6) => out.push_str(&format!("<code>{}</code>", self.text())),
                    _ => out.push_str(&format!("<a href=\"/p?q=1\">{}</a>", self.text())),
                }
                if self.next().is_multiple_of(5) {
                    out.push_str("<br>");
                }
            }
            out
        }

        fn block(&mut self, depth: u32) -> String {
            match (depth, self.next() % 7) {
                (0, _) | (_, 0..=2) => format!("<p>{}</p>", self.inline(2)),
                (_, 3) => format!("<h2>{}</h2>", self.inline(1)),
                (_, 4) => {
                    let items: String = (0..1 + self.next() % 3)
                        .map(|_| format!("<li>{}</li>", self.block(depth - 1)))
                        .collect();
                    format!("<ul>{items}</ul>")
                }
                (_, 5) => format!("<blockquote>{}</blockquote>", self.block(depth - 1)),
                _ => format!(
                    "<table><tr><th>{}</th><th>h</th></tr><tr><td>{}</td><td>{}</td></tr></table>",
                    self.inline(1),
                    self.inline(1),
                    self.text()
                ),
            }
        }
    }

    #[test]
    fn generated_documents_keep_their_text() {
        let mut g = Gen(0x5EED_CAFE_F00D_1234);
        for _ in 0..3000 {
            let body: String = (0..1 + g.next() % 4).map(|_| g.block(3)).collect();
            assert_round_trip(&format!("<html><body>{body}</body></html>"));
        }
    }
}

#[test]
fn a_selector_schema_on_a_hostile_page_stops_at_the_deadline() {
    // 400 nested divs around 20,000 paragraphs: every div is a base match whose 100 fields
    // each search its whole subtree for an element that is not there (8e8 nodes visited).
    let html = format!(
        "{}{}{}",
        "<div>".repeat(400),
        "<p>x</p>".repeat(20_000),
        "</div>".repeat(400)
    );
    let fields: Vec<crate::domain::Field> = (0..100)
        .map(|i| crate::domain::Field {
            name: format!("f{i}"),
            selector: Some("span".into()),
            kind: crate::domain::FieldKind::Text,
            attribute: None,
            fields: Vec::new(),
            default: None,
        })
        .collect();
    let opts = ExtractOptions {
        schema: Some(SelectorSchema {
            base_selector: Some("div".into()),
            fields,
        }),
        ..Default::default()
    };
    let url = Url::parse("https://example.com/").unwrap();
    let started = Instant::now();
    let r = extract_html(&html, &url, &opts, &Budget::new(Duration::from_millis(500)));
    assert!(r.is_err(), "the work was cut short");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn fragments_resolve_as_the_url_parser_resolves_them() {
    let bases = [
        "https://example.com/docs/page",
        "https://example.com/docs/page?q=1#top",
        "http://user:pw@example.com:8080/a/b/",
        "data:text/html,hello",
        "mailto:someone@example.com",
    ];
    let hrefs = [
        "#", "#a", " #a b ", "#%zz", "#é", "#\t\nx", "#a#b", "\u{a0}#x",
    ];
    for base in bases {
        let base = Url::parse(base).unwrap();
        for href in hrefs {
            let want = base.join(href.trim()).ok().and_then(|mut u| {
                u.set_fragment(None);
                matches!(u.scheme(), "http" | "https").then_some(u)
            });
            assert_eq!(absolute(&base, href), want, "{href:?} against {base}");
        }
    }
}
