//! Screenshots of rendered pages: a PNG of the asked size that shows the page (its colours at
//! known places), a full page as tall as the page up to 16,384 px, stored as an artifact of the
//! job that only its owner can read (the PNG on the embedded server, a redirect to a link into
//! the bucket on AWS), and `screenshot` without `render` refused.

use e2e::{Api, Route, Serve, Site};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(90);
const ALICE: &str = "alice-key-0123456789";
const BOB: &str = "bob-key-0123456789ab";

/// A red page with a blue box at (100, 50), 200 x 100, and `tall` pixels of content.
fn page(tall: u32) -> String {
    format!(
        r#"<html><head><title>Colours</title><style>
html, body {{ margin: 0; background: #ff0000; }}
#box {{ position: absolute; left: 100px; top: 50px; width: 200px; height: 100px; background: #0000ff; }}
#tall {{ height: {tall}px; }}
</style></head><body><div id="box"></div><div id="tall"><p>Colours</p></div></body></html>"#
    )
}

/// A decoded image: width, height and RGB of every pixel.
struct Image {
    width: u32,
    height: u32,
    rgb: Vec<[u8; 3]>,
}

impl Image {
    fn decode(png: &[u8]) -> Image {
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let mut reader = decoder.read_info().expect("a PNG");
        let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
        let info = reader.next_frame(&mut buf).expect("a frame");
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        let samples = info.color_type.samples();
        assert!(samples >= 3, "{:?}", info.color_type);
        let rgb = buf[..info.buffer_size()]
            .chunks(samples)
            .map(|p| [p[0], p[1], p[2]])
            .collect();
        Image {
            width: info.width,
            height: info.height,
            rgb,
        }
    }

    fn at(&self, x: u32, y: u32) -> [u8; 3] {
        self.rgb[(y * self.width + x) as usize]
    }
}

/// The bytes behind a document's screenshot URL, as its owner reads them: the PNG from the
/// API itself, or (AWS) from the short-lived link the API redirects to.
async fn artifact(api: &Api, url: &str) -> Vec<u8> {
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let resp = no_redirects
        .get(format!("{}{url}", api.base))
        .bearer_auth(api.key().unwrap())
        .send()
        .await
        .unwrap();
    let resp = if e2e::server::aws_backend() {
        assert_eq!(resp.status(), 302, "a link into the bucket");
        let link = resp.headers()["location"].to_str().unwrap().to_string();
        assert!(link.contains("X-Amz-Expires=300"), "{link}");
        reqwest::get(&link).await.unwrap()
    } else {
        assert_eq!(resp.headers()["content-type"], "image/png");
        resp
    };
    assert_eq!(resp.status(), 200);
    resp.bytes().await.unwrap().to_vec()
}

async fn scrape(api: &Api, body: Value) -> Value {
    let (_, job) = api.run("scrape", &body, WAIT).await;
    assert_eq!(job["status"], "completed", "{job}");
    job
}

#[tokio::test(flavor = "multi_thread")]
async fn a_screenshot_shows_the_page_at_its_size_and_only_to_its_owner() {
    let routes: HashMap<String, Route> = [
        ("/".to_string(), Route::Html(page(1000))),
        ("/tall".to_string(), Route::Html(page(20_000))),
    ]
    .into();
    let site = Site::start(routes).await;
    let serve = Serve::with(
        &["--allow-net", "127.0.0.1/32"],
        &[("SARVCRAWL_API_KEYS", &format!("alice:{ALICE},bob:{BOB}"))],
    );
    let alice = serve.api(Some(ALICE));
    let bob = serve.api(Some(BOB));

    let job = scrape(
        &alice,
        json!({"url": site.url("/"), "render": true, "formats": ["markdown", "screenshot"],
               "screenshot": {"width": 800, "height": 600}}),
    )
    .await;
    let doc = &job["result"];
    assert!(
        doc["markdown"].as_str().unwrap().contains("Colours"),
        "{doc}"
    );
    let shot = &doc["screenshot"];
    assert_eq!(
        (shot["width"].as_u64(), shot["height"].as_u64()),
        (Some(800), Some(600))
    );
    let url = shot["url"].as_str().unwrap();
    let id = job["job_id"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("/api/jobs/{id}/artifacts/")),
        "{url}"
    );

    let png = artifact(&alice, url).await;
    assert_eq!(shot["bytes"].as_u64(), Some(png.len() as u64));
    let image = Image::decode(&png);
    assert_eq!((image.width, image.height), (800, 600));
    assert_eq!(image.at(10, 10), [255, 0, 0], "the page's background");
    assert_eq!(image.at(200, 100), [0, 0, 255], "the box");
    assert_eq!(image.at(310, 100), [255, 0, 0], "right of the box");

    // Another user, and names that are no artifact of the job, find nothing.
    assert_eq!(bob.get(url).await.status, 404);
    let other = url.replace(".png", ".json");
    assert_eq!(alice.get(&other).await.status, 404);
    let missing = format!("/api/jobs/{id}/artifacts/{}.png", "0".repeat(32));
    assert_eq!(alice.get(&missing).await.status, 404);

    // A full page is as tall as the page, up to 16,384 px.
    let job = scrape(
        &alice,
        json!({"url": site.url("/"), "render": true, "formats": ["screenshot"],
               "screenshot": {"full_page": true, "width": 640, "height": 400}}),
    )
    .await;
    let shot = &job["result"]["screenshot"];
    let image = Image::decode(&artifact(&alice, shot["url"].as_str().unwrap()).await);
    assert_eq!(image.width, 640);
    assert!((1000..1100).contains(&image.height), "{}", image.height);
    assert_eq!(shot["height"].as_u64(), Some(u64::from(image.height)));
    assert_eq!(image.at(150, 75), [0, 0, 255]);
    assert_eq!(image.at(5, image.height - 5), [255, 0, 0]);

    let job = scrape(
        &alice,
        json!({"url": site.url("/tall"), "render": true, "formats": ["screenshot"],
               "screenshot": {"full_page": true, "width": 320}}),
    )
    .await;
    let shot = &job["result"]["screenshot"];
    let image = Image::decode(&artifact(&alice, shot["url"].as_str().unwrap()).await);
    assert_eq!((image.width, image.height), (320, 16_384));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_screenshot_needs_render_and_bounded_options() {
    let serve = Serve::start();
    let api = serve.api(None);
    let r = api
        .post(
            "/api/scrape",
            &json!({"url": "http://127.0.0.1:9/", "formats": ["screenshot"]}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        r.body["error"]["details"][0]["field"], "render",
        "{}",
        r.body
    );
    let r = api
        .post(
            "/api/crawl",
            &json!({"url": "http://127.0.0.1:9/", "render": true, "formats": ["screenshot"],
                    "screenshot": {"width": 5000}}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["details"][0]["field"], "screenshot.width");
    // Nothing was stored for either.
    let jobs = api.get("/api/jobs").await;
    assert_eq!(
        jobs.body["jobs"].as_array().map(Vec::len),
        Some(0),
        "{}",
        jobs.body
    );
}
