//! The [`Renderer`] over headless Chromium and the DevTools protocol: one browser per process,
//! started on first use and reused; each render in a fresh browser context of its own whose
//! every request goes through a [`GuardProxy`]; a crashed or hung browser is replaced.

use crate::launch::{launch, Process};
use crate::proxy::GuardProxy;
use async_trait::async_trait;
use bytes::Bytes;
use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::cdp::browser_protocol::fetch::{
    ContinueRequestParams, EnableParams as FetchEnableParams, EventRequestPaused, HeaderEntry,
    RequestPattern,
};
use chromiumoxide::cdp::browser_protocol::network::{
    EventRequestWillBeSent, EventResponseReceived, Headers, ResourceType,
    SetBypassServiceWorkerParams,
};
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, FrameId, StopLoadingParams, Viewport,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams,
};
use chromiumoxide::handler::HandlerConfig;
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::{Browser, Page};
use futures::{FutureExt, StreamExt};
use sarvcrawl_core::domain::{ErrorCode, JobError, ScreenshotOptions};
use sarvcrawl_core::engine::fetch::{FetchError, Fetched};
use sarvcrawl_core::engine::guard::AddressPolicy;
use sarvcrawl_core::ports::{RenderRequest, Rendered, Renderer, Screenshot};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, Semaphore};
use tokio::task::JoinHandle;

/// How long a browser-wide command (opening or closing a context) may take before the browser
/// is considered hung and replaced.
const COMMAND: Duration = Duration::from_secs(10);
/// How often `wait_for` looks for its element.
const POLL: Duration = Duration::from_millis(100);
/// Redirects a page may take before it loads (S6), as for fetched pages.
const MAX_REDIRECTS: usize = 5;
/// Largest rendered DOM kept (the fetcher's body cap).
const MAX_HTML: usize = 10 * 1024 * 1024;
/// Largest screenshot kept.
const MAX_SCREENSHOT: usize = 40 * 1024 * 1024;

/// Runs in every page before its own scripts: no service worker can be registered (S9).
const NO_SERVICE_WORKERS: &str = "if (navigator.serviceWorker) { \
    Object.defineProperty(navigator.serviceWorker, 'register', { value: () => \
    Promise.reject(new DOMException('service workers are disabled', 'SecurityError')) }); }";

/// Settings of the renderer.
#[derive(Debug, Clone)]
pub struct ChromiumConfig {
    /// The Chromium (or Chrome) executable.
    pub executable: PathBuf,
    /// The `User-Agent` of the browser's requests.
    pub user_agent: String,
    /// Pages rendered at once by this process.
    pub max_pages: usize,
}

/// Headless Chromium as the service's [`Renderer`].
pub struct Chromium {
    config: ChromiumConfig,
    policy: Arc<AddressPolicy>,
    instance: Mutex<Option<Arc<Instance>>>,
    pages: Semaphore,
}

/// One running browser and the task that pumps its DevTools connection.
struct Instance {
    browser: Browser,
    handler: JoinHandle<()>,
    process: Process,
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.handler.abort();
    }
}

impl Instance {
    fn alive(&self) -> bool {
        !self.handler.is_finished() && self.process.running()
    }
}

impl Chromium {
    /// A renderer whose browser requests obey `policy`; the browser starts on first use.
    pub fn new(config: ChromiumConfig, policy: AddressPolicy) -> Self {
        let pages = Semaphore::new(config.max_pages.max(1));
        Chromium {
            config,
            policy: Arc::new(policy),
            instance: Mutex::new(None),
            pages,
        }
    }

    /// The running browser, started (again) when there is none or it died.
    async fn browser(&self) -> Result<Arc<Instance>, FetchError> {
        let mut slot = self.instance.lock().await;
        if let Some(i) = slot.as_ref().filter(|i| i.alive()) {
            return Ok(i.clone());
        }
        *slot = None;
        let process = launch(&self.config.executable).await.map_err(|e| {
            tracing::error!(error = %e, "Chromium did not start");
            FetchError::Failed
        })?;
        let config = HandlerConfig {
            ignore_https_errors: false,
            request_timeout: Duration::from_secs(30),
            ..HandlerConfig::default()
        };
        let connected = tokio::time::timeout(
            COMMAND,
            Browser::connect_with_config(process.endpoint(), config),
        )
        .await;
        let Ok(Ok((browser, mut handler))) = connected else {
            tracing::error!("could not connect to Chromium");
            return Err(FetchError::Failed);
        };
        let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
        let instance = Arc::new(Instance {
            browser,
            handler,
            process,
        });
        *slot = Some(instance.clone());
        Ok(instance)
    }

    /// Forgets `instance` (when it is still the current one) so the next render starts a new
    /// browser; the old one is killed when its last render lets go of it.
    async fn replace(&self, instance: &Arc<Instance>) {
        let mut slot = self.instance.lock().await;
        if slot.as_ref().is_some_and(|i| Arc::ptr_eq(i, instance)) {
            tracing::warn!("replacing an unresponsive Chromium");
            *slot = None;
        }
    }

    /// The process id of the running browser, if one runs (its renderers are its children).
    pub async fn browser_pid(&self) -> Option<u32> {
        let slot = self.instance.lock().await;
        slot.as_ref()
            .filter(|i| i.alive())
            .and_then(|i| i.process.id())
    }

    /// Stops the browser now (it is also stopped when the renderer is dropped).
    pub async fn shutdown(&self) {
        self.instance.lock().await.take();
    }
}

#[async_trait]
impl Renderer for Chromium {
    async fn render(&self, req: RenderRequest<'_>) -> Rendered {
        let Ok(_permit) = self.pages.acquire().await else {
            return failed(FetchError::Failed);
        };
        // The page's deadline runs from its turn, not from when it started waiting for one.
        let started = Instant::now();
        let instance = match self.browser().await {
            Ok(i) => i,
            Err(e) => return failed(e),
        };
        let proxy = match GuardProxy::start(self.policy.clone()).await {
            Ok(p) => p,
            Err(_) => return failed(FetchError::Failed),
        };
        let context = CreateBrowserContextParams::builder()
            .dispose_on_detach(true)
            .proxy_server(proxy.server())
            // Loopback goes through the proxy too: Chromium would otherwise connect directly.
            .proxy_bypass_list("<-loopback>")
            .build();
        let created =
            tokio::time::timeout(COMMAND, instance.browser.create_browser_context(context)).await;
        let context = match created {
            Ok(Ok(c)) => c,
            _ => {
                tracing::warn!("the browser did not open a context");
                self.replace(&instance).await;
                return failed(FetchError::Failed);
            }
        };
        let remaining = req.timeout.saturating_sub(started.elapsed());
        let page = match tokio::time::timeout(
            remaining,
            load(&instance.browser, &context, &req, &self.config.user_agent),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(FetchError::Timeout),
        };
        let closed =
            tokio::time::timeout(COMMAND, instance.browser.dispose_browser_context(context)).await;
        if !matches!(closed, Ok(Ok(()))) {
            self.replace(&instance).await;
        }
        let blocked = proxy.blocked();
        let (page, screenshot) = match page {
            Ok((page, shot)) => (Ok(page), shot),
            // A page that could not load because the guard refused it is a blocked address.
            Err(FetchError::Failed) if !blocked.is_empty() => (Err(FetchError::Blocked), None),
            Err(e) => (Err(e), None),
        };
        Rendered {
            page,
            screenshot,
            blocked,
        }
    }
}

fn failed(e: FetchError) -> Rendered {
    Rendered {
        page: Err(e),
        screenshot: None,
        blocked: Vec::new(),
    }
}

/// A screenshot taken, or why none was.
type Shot = Option<Result<Screenshot, JobError>>;

/// Opens the page in `context`, loads it, waits as asked, reads its DOM and takes its
/// screenshot when one is asked for.
async fn load(
    browser: &Browser,
    context: &BrowserContextId,
    req: &RenderRequest<'_>,
    user_agent: &str,
) -> Result<(Fetched, Shot), FetchError> {
    let started = Instant::now();
    let cdp = |e: chromiumoxide::error::CdpError| {
        tracing::debug!(error = %e, "DevTools command failed");
        FetchError::Failed
    };
    browser
        .execute(
            SetDownloadBehaviorParams::builder()
                .behavior(SetDownloadBehaviorBehavior::Deny)
                .browser_context_id(context.clone())
                .build()
                .map_err(|_| FetchError::Failed)?,
        )
        .await
        .map_err(cdp)?;
    let mut target = CreateTargetParams::new("about:blank");
    target.browser_context_id = Some(context.clone());
    let page = browser.new_page(target).await.map_err(cdp)?;
    let _headers = prepare(&page, req, user_agent).await.map_err(cdp)?;
    if let Some(o) = req.screenshot {
        // The page lays itself out for the window it is taken in.
        page.execute(window(o.width, o.height)).await.map_err(cdp)?;
    }
    let main = page.mainframe().await.map_err(cdp)?;
    let mut responses = page
        .event_listener::<EventResponseReceived>()
        .await
        .map_err(cdp)?;
    let mut requests = page
        .event_listener::<EventRequestWillBeSent>()
        .await
        .map_err(cdp)?;
    page.goto(req.url.as_str()).await.map_err(cdp)?;
    // Waits for the load; what it reports is not the page's own response (see below).
    let _ = page.wait_for_navigation().await;
    if let Some(selector) = req.wait_for {
        let probe = format!(
            "document.querySelector({}) !== null",
            serde_json::Value::from(selector)
        );
        loop {
            let found = page
                .evaluate(probe.as_str())
                .await
                .ok()
                .and_then(|r| r.into_value::<bool>().ok());
            if found == Some(true) {
                break;
            }
            tokio::time::sleep(POLL).await;
        }
    }
    if req.wait_ms > 0 {
        tokio::time::sleep(Duration::from_millis(req.wait_ms)).await;
    }
    // The page's status and redirects are its main frame's documents', not those of whatever
    // request of the frame finished last (a 404 favicon, an image).
    let is_main = |frame: &Option<FrameId>| main.is_none() || frame.as_ref() == main.as_ref();
    let mut status = 200;
    while let Some(Some(r)) = responses.next().now_or_never() {
        if r.r#type == ResourceType::Document && is_main(&r.frame_id) {
            status = u16::try_from(r.response.status).unwrap_or(200);
        }
    }
    let mut redirects = 0;
    while let Some(Some(r)) = requests.next().now_or_never() {
        if r.r#type == Some(ResourceType::Document)
            && is_main(&r.frame_id)
            && r.redirect_response.is_some()
        {
            redirects += 1;
        }
    }
    if redirects > MAX_REDIRECTS {
        return Err(FetchError::TooManyRedirects(MAX_REDIRECTS));
    }
    // The page is read as it stands: a navigation it started itself and that has not
    // committed yet (a destination slow to answer) would hold the read until the job's deadline.
    page.execute(StopLoadingParams::default())
        .await
        .map_err(cdp)?;
    let html = page.content().await.map_err(cdp)?;
    if html.len() > MAX_HTML {
        return Err(FetchError::TooLarge(MAX_HTML));
    }
    let url = page
        .url()
        .await
        .ok()
        .flatten()
        .and_then(|u| url::Url::parse(&u).ok())
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or(FetchError::Failed)?;
    let shot = match req.screenshot {
        Some(o) => Some(capture(&page, o).await),
        None => None,
    };
    let fetched = Fetched {
        url,
        status,
        content_type: Some("text/html; charset=utf-8".into()),
        retry_after: None,
        body: Bytes::from(html),
        elapsed: started.elapsed(),
    };
    Ok((fetched, shot))
}

/// A window of `width` x `height` CSS pixels, one device pixel each.
fn window(width: u32, height: u32) -> SetDeviceMetricsOverrideParams {
    SetDeviceMetricsOverrideParams::new(i64::from(width), i64::from(height), 1., false)
}

/// A PNG of the window, or of the whole page (the window grown to the page's height, at most
/// [`ScreenshotOptions::MAX_HEIGHT`]).
async fn capture(page: &Page, o: ScreenshotOptions) -> Result<Screenshot, JobError> {
    let failed = |e: chromiumoxide::error::CdpError| {
        tracing::debug!(error = %e, "the screenshot failed");
        JobError::new(
            ErrorCode::FetchFailed,
            "the browser could not take the screenshot",
        )
    };
    let mut height = o.height;
    if o.full_page {
        let metrics = page.layout_metrics().await.map_err(failed)?;
        // A float's cast saturates (and a NaN is 0), so the page cannot ask for more.
        let tall = metrics.css_content_size.height.ceil() as u32;
        height = tall.clamp(1, ScreenshotOptions::MAX_HEIGHT);
        page.execute(window(o.width, height))
            .await
            .map_err(failed)?;
    }
    let clip = Viewport {
        x: 0.,
        y: 0.,
        width: f64::from(o.width),
        height: f64::from(height),
        scale: 1.,
    };
    let params = ScreenshotParams::builder()
        .format(CaptureScreenshotFormat::Png)
        .clip(clip)
        .build();
    let png = page.screenshot(params).await.map_err(failed)?;
    if png.len() > MAX_SCREENSHOT {
        return Err(JobError::new(
            ErrorCode::TooLarge,
            format!("the screenshot is over {} MiB", MAX_SCREENSHOT >> 20),
        ));
    }
    let (width, height) = png_size(&png).ok_or_else(|| {
        JobError::new(
            ErrorCode::FetchFailed,
            "the browser's screenshot is not a PNG",
        )
    })?;
    Ok(Screenshot {
        png: Bytes::from(png),
        width,
        height,
    })
}

/// The width and height a PNG's header gives.
fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    let header = png.get(..24)?;
    if &header[..8] != SIGNATURE || &header[12..16] != b"IHDR" {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some((be(&header[16..20]), be(&header[20..24])))
}

/// Before the page loads: no service workers, the user agent, and the request's headers for
/// the requests that go to the page's own origin (the task that adds them ends with the page).
async fn prepare(
    page: &Page,
    req: &RenderRequest<'_>,
    user_agent: &str,
) -> chromiumoxide::Result<Option<AbortOnDrop>> {
    page.execute(SetBypassServiceWorkerParams::new(true))
        .await?;
    page.evaluate_on_new_document(NO_SERVICE_WORKERS).await?;
    page.set_user_agent(user_agent).await?;
    if req.headers.is_empty() {
        return Ok(None);
    }
    // S10: a page's requests to other origins (subresources, redirects, its scripts' fetches)
    // never carry the request's headers, credentials above all. Every request is paused and
    // continued with the headers only when it goes to the page's origin.
    let mut paused = page.event_listener::<EventRequestPaused>().await?;
    let pattern = RequestPattern::builder().url_pattern("*").build();
    page.execute(FetchEnableParams::builder().pattern(pattern).build())
        .await?;
    let (page, origin) = (page.clone(), req.url.origin());
    let extra: Vec<HeaderEntry> = req
        .headers
        .iter()
        .map(|(name, value)| HeaderEntry::new(name.clone(), value.clone()))
        .collect();
    let task = tokio::spawn(async move {
        while let Some(event) = paused.next().await {
            let mut next = ContinueRequestParams::new(event.request_id.clone());
            let same_origin =
                url::Url::parse(&event.request.url).is_ok_and(|u| u.origin() == origin);
            if same_origin {
                next.headers = Some(with_headers(&event.request.headers, &extra));
            }
            if page.execute(next).await.is_err() {
                return;
            }
        }
    });
    Ok(Some(AbortOnDrop(task)))
}

/// A request's own headers with `extra` added (replacing any of the same name).
fn with_headers(own: &Headers, extra: &[HeaderEntry]) -> Vec<HeaderEntry> {
    let mut out: Vec<HeaderEntry> = own
        .inner()
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(name, _)| !extra.iter().any(|e| e.name.eq_ignore_ascii_case(name)))
        .filter_map(|(name, value)| Some(HeaderEntry::new(name.clone(), value.as_str()?)))
        .collect();
    out.extend(extra.iter().cloned());
    out
}

/// A task that is stopped when this is dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
