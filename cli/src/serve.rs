//! `sarvcrawl serve`: configuration, start-up checks, workers and the HTTP server.

use crate::backend::{self, Kind};
use crate::server;
use clap::Args;
use ipnet::IpNet;
use sarvcrawl_core::app::model::ModelSettings;
use sarvcrawl_core::app::{worker, App, Config};
use sarvcrawl_core::auth::{Auth, KeyRing, LOCAL_USER};
use sarvcrawl_core::engine::fetch::{FetchConfig, Fetcher};
use sarvcrawl_core::engine::guard::AddressPolicy;
use sarvcrawl_core::engine::pool::lower_priority;
use sarvcrawl_core::ports::{Clock, Renderer, SystemClock};
use sarvcrawl_render::{Chromium, ChromiumConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Where jobs, tasks and documents live.
    #[arg(long, env = "SARVCRAWL_BACKEND", value_enum, default_value = "local")]
    backend: Kind,

    /// Address to listen on. Without API keys only a loopback address is accepted.
    #[arg(long, env = "SARVCRAWL_ADDR", default_value = "127.0.0.1:8080")]
    addr: SocketAddr,

    /// Write the address actually listened on to this file once listening (useful with
    /// port 0).
    #[arg(long, env = "SARVCRAWL_ADDR_FILE", value_name = "FILE")]
    addr_file: Option<PathBuf>,

    /// Directory for the SQLite database and stored documents.
    #[arg(long, env = "SARVCRAWL_DATA_DIR", default_value = "./.sarvcrawl")]
    data_dir: PathBuf,

    /// Worker loops draining the work queue (each keeps up to 8 pages in flight); 0 runs
    /// none (another process works the queue). Default: the number of CPU cores.
    #[arg(long, env = "SARVCRAWL_WORKERS")]
    workers: Option<usize>,

    /// Run worker loops only: no API, no schedule. With the AWS backend, any number of such
    /// processes may work one deployment's queue beside the one that serves the API.
    #[arg(long, env = "SARVCRAWL_WORKERS_ONLY")]
    workers_only: bool,

    /// Requests to one host at once, across all jobs and all processes of the deployment.
    #[arg(long, env = "SARVCRAWL_PER_HOST_CONCURRENCY", default_value_t = 8)]
    per_host_concurrency: u32,

    /// Seconds a user's crawl or scrape slot stays held unless renewed (the sweep renews it
    /// while the job is alive, every third of this or 10 s, whichever is shorter).
    #[arg(long, env = "SARVCRAWL_SLOT_LEASE", default_value_t = 900)]
    slot_lease: u64,

    /// Minutes a job may go without progress before its pages are queued again and, after
    /// three such repairs, it fails (never less than the visibility timeout and a minute).
    #[arg(long, env = "SARVCRAWL_STALLED_MINUTES", default_value_t = 30)]
    stalled_minutes: u64,

    /// Open a network that is blocked by default (loopback, private ranges), e.g.
    /// 127.0.0.1/32 to crawl a site on this machine. Repeatable; the env variable takes a
    /// comma-separated list.
    #[arg(
        long = "allow-net",
        env = "SARVCRAWL_ALLOW_NETS",
        value_delimiter = ',',
        value_name = "CIDR"
    )]
    allow_nets: Vec<IpNet>,

    /// File of API keys, one `user_id:key` a line. SARVCRAWL_API_KEYS
    /// (`user_id:key,user_id:key`) adds more. With no keys at all, a loopback server serves
    /// one user, `local`, without a key.
    #[arg(long, env = "SARVCRAWL_API_KEYS_FILE", value_name = "FILE")]
    api_keys_file: Option<PathBuf>,

    /// Seconds a received task stays invisible before it is delivered again.
    #[arg(long, env = "SARVCRAWL_VISIBILITY_TIMEOUT", default_value_t = 300)]
    visibility_timeout: u64,

    /// User-Agent sent with every request.
    #[arg(long, env = "SARVCRAWL_USER_AGENT")]
    user_agent: Option<String>,

    /// Active map, search and upload jobs a user may have at once (scrape and crawl have one
    /// slot each).
    #[arg(long, env = "SARVCRAWL_MAX_ACTIVE_JOBS", default_value_t = 10)]
    max_active_jobs: u32,

    /// Shortest interval between a monitor's checks, in seconds.
    #[arg(long, env = "SARVCRAWL_MONITOR_MIN_INTERVAL", default_value_t = 60)]
    monitor_min_interval: u64,

    /// Largest document (a PDF) fetched by URL, in MiB of decoded bytes.
    #[arg(long, env = "SARVCRAWL_MAX_DOCUMENT_MIB", default_value_t = 25)]
    max_document_mib: usize,

    /// The pauses before each retry of a webhook delivery, in seconds, comma-separated.
    /// Default: 5,30,120,600,1800,3600,10800,21600,43200 (about 24 hours).
    #[arg(long, env = "SARVCRAWL_WEBHOOK_RETRIES", value_name = "SECONDS,...", value_parser = parse_retries)]
    webhook_retries: Option<Retries>,

    /// The Chromium executable for `render: true`. Default: `chromium` (or Chrome) on PATH.
    #[arg(long, env = "SARVCRAWL_CHROMIUM", value_name = "PATH")]
    chromium: Option<PathBuf>,

    /// Pages rendered at once in the headless browser.
    #[arg(long, env = "SARVCRAWL_RENDER_PAGES", default_value_t = 4)]
    render_pages: usize,

    /// Turn rendering off even when Chromium is installed (`render: true` answers 503).
    #[arg(long)]
    no_render: bool,

    /// Open client connections at most (further ones are closed at once); also bounded by
    /// the process's open-file limit, which the server raises to the system's maximum.
    #[arg(long, env = "SARVCRAWL_MAX_CONNECTIONS", default_value_t = 4096)]
    max_connections: usize,

    /// Seconds a client has to send a request's head once it has started it.
    #[arg(long, env = "SARVCRAWL_HEADER_TIMEOUT", default_value_t = 10)]
    header_timeout: u64,

    /// Seconds an open connection may wait for its next request.
    #[arg(long, env = "SARVCRAWL_IDLE_TIMEOUT", default_value_t = 60)]
    idle_timeout: u64,
}

fn load_keys(args: &ServeArgs) -> Result<KeyRing, String> {
    let mut ring = KeyRing::default();
    if let Some(path) = &args.api_keys_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        ring.merge(KeyRing::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?);
    }
    if let Ok(env) = std::env::var("SARVCRAWL_API_KEYS") {
        ring.merge(KeyRing::parse(&env).map_err(|e| format!("SARVCRAWL_API_KEYS: {e}"))?);
    }
    Ok(ring)
}

/// One rule on every backend (SECURITY.md T4): the keys of the configuration and the keys the
/// backend keeps are checked on every request; with none at all the server is open, and then
/// only on a loopback address.
async fn authentication(args: &ServeArgs, backend: &backend::Backend) -> Result<Auth, String> {
    let auth = Auth::new(load_keys(args)?, backend.keys.clone())
        .await
        .map_err(|e| format!("cannot read the backend's API keys: {e}"))?;
    if !auth.is_open() {
        let kept = if backend.keys.is_some() {
            " and those of the backend's table"
        } else {
            ""
        };
        tracing::info!(
            "API keys required: {} configured{kept}",
            auth.configured_keys()
        );
        return Ok(auth);
    }
    if !args.addr.ip().is_loopback() {
        return Err(format!(
            "refusing to serve {} without API keys: set --api-keys-file or SARVCRAWL_API_KEYS{}, \
             or listen on a loopback address",
            args.addr,
            if backend.keys.is_some() {
                ", or add a key to the table (sarvcrawl aws add-key)"
            } else {
                ""
            }
        ));
    }
    tracing::warn!(
        "no API keys anywhere: every request is user `{LOCAL_USER}`, no key needed (served on \
         loopback only)"
    );
    Ok(auth)
}

/// Runs the server until Ctrl-C or SIGTERM.
pub async fn run(args: ServeArgs) -> Result<(), String> {
    // The benchmarks' breakdown of a page's CPU time, a `stage-cpu {...}` line on stderr when
    // the server stops.
    if std::env::var_os("SARVCRAWL_STAGE_CPU").is_some_and(|v| v == "1") {
        sarvcrawl_core::stages::enable();
    }
    if !args.allow_nets.is_empty() {
        let nets: Vec<String> = args.allow_nets.iter().map(ToString::to_string).collect();
        tracing::warn!(networks = %nets.join(","), "fetching from normally blocked networks is allowed");
    }

    let visibility = Duration::from_secs(args.visibility_timeout.max(1));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let backend = backend::open(args.backend, &args.data_dir, visibility, clock.clone()).await?;
    // A process that only works the queue serves no one.
    let auth = if args.workers_only {
        None
    } else {
        Some(authentication(&args, &backend).await?)
    };
    // Descriptors for the connections, the stores, the browser and the fetches.
    let open_files = server::raise_open_files();
    let limits = server::Limits {
        max_connections: args
            .max_connections
            .min((open_files as usize).saturating_sub(512))
            .max(1),
        timeouts: server::Timeouts {
            idle: Duration::from_secs(args.idle_timeout.max(1)),
            header: Duration::from_secs(args.header_timeout.max(1)),
            write_stall: Duration::from_secs(30),
        },
        body: Duration::from_secs(60),
    };
    let mut fetch = FetchConfig::default();
    if let Some(ua) = &args.user_agent {
        fetch.user_agent = ua.clone();
    }
    fetch.max_document_bytes = args.max_document_mib.max(1) << 20;
    let fetcher = Fetcher::new(AddressPolicy::new(args.allow_nets.clone()), fetch)
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let search = sarvcrawl_core::engine::search::from_env()?;
    match &search {
        Some(p) => tracing::info!(provider = p.name(), "web search is available"),
        None => tracing::info!(
            "web search is not available: set SARVCRAWL_SEARXNG_URL or SARVCRAWL_BRAVE_API_KEY"
        ),
    }
    let model = sarvcrawl_core::engine::llm::from_env()?;
    match &model {
        Some(m) => tracing::info!(
            model = m.name(),
            "extraction by a language model is available"
        ),
        None => tracing::info!(
            "extraction by a language model is not available: set SARVCRAWL_LLM_BASE_URL and \
             SARVCRAWL_LLM_MODEL"
        ),
    }
    let user_agent = fetcher.user_agent().to_string();
    let renderer = renderer(&args, user_agent)?;
    let app = Arc::new(
        App::new(
            backend.store.clone(),
            backend.queue.clone(),
            backend.blobs.clone(),
            clock,
            Arc::new(fetcher),
            Config {
                max_active_jobs: args.max_active_jobs.max(1),
                monitor_min_interval: args.monitor_min_interval.max(1),
                render_available: renderer.is_some(),
                per_host_concurrency: args.per_host_concurrency.max(1),
                slot_lease: Duration::from_secs(args.slot_lease.max(1)),
                stall_after: Duration::from_secs(args.stalled_minutes.max(1) * 60),
                webhook_retries: args
                    .webhook_retries
                    .clone()
                    .map_or_else(|| Config::default().webhook_retries, |r| r.0),
                ..Config::default()
            }
            .with_visibility(visibility),
        )
        .with_search(search)
        .with_model(model, ModelSettings::from_env()?)
        .with_renderer(renderer.clone().map(|r| r as Arc<dyn Renderer>)),
    );

    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    if args.workers_only {
        tracing::info!(backend = ?args.backend, workers, "SarvCrawl {} working the queue", sarvcrawl_core::VERSION);
        let worker_handle = tokio::spawn(worker::run_workers(app, workers.max(1), stop_rx));
        shutdown_signal().await;
        let _ = stop_tx.send(true);
        let _ = worker_handle.await;
        return finish(renderer, backend).await;
    }

    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    if let Some(path) = &args.addr_file {
        // Written whole under another name first, so a reader never sees half of it.
        let partial = path.with_extension("partial");
        std::fs::write(&partial, bound.to_string())
            .and_then(|()| std::fs::rename(&partial, path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let background = background_runtime()?;
    let worker_handle = (workers > 0)
        .then(|| background.spawn(worker::run_workers(app.clone(), workers, stop_rx.clone())));
    let scheduler_handle = background.spawn(schedule(app.clone(), stop_rx.clone()));
    let dead_letter_handle = backend
        .dead_letters
        .clone()
        .map(|dlq| background.spawn(worker::run_dead_letters(app.clone(), dlq, stop_rx)));
    tracing::info!(
        backend = ?args.backend,
        workers,
        max_connections = limits.max_connections,
        "SarvCrawl {} listening on http://{bound}",
        sarvcrawl_core::VERSION
    );
    let auth = auth.ok_or("no authentication configured")?;
    server::serve(listener, app, Arc::new(auth), limits, shutdown_signal())
        .await
        .map_err(|e| format!("server error: {e}"))?;
    let _ = stop_tx.send(true);
    if let Some(h) = worker_handle {
        let _ = h.await;
    }
    let _ = scheduler_handle.await;
    if let Some(h) = dead_letter_handle {
        let _ = h.await;
    }
    // What is left there (a kept place's timer) is dropped; its lease frees the place.
    background.shutdown_background();
    finish(renderer, backend).await
}

/// The background's threads' nice value: below the API's, above the parses'
/// ([`WORK_NICE`](sarvcrawl_core::engine::pool::WORK_NICE)).
const BACKGROUND_NICE: i32 = 5;

/// Threads of the background's runtime. Its tasks wait on the network and the store and hand
/// every parse to the extraction pool, so one thread keeps up; a second only added wake-ups
/// handed between threads (the Python docs crawl, runs alternated: 3.41-3.50 -> 3.07-3.22 ms
/// of CPU a page on the worker path, 1.91-1.93 -> 1.82-1.91 on the embedded server).
const BACKGROUND_THREADS: usize = 1;

/// The runtime of the background (the workers, the scheduler, the dead letters), apart from the
/// API's: a request never waits in a run queue behind the tasks of a busy crawl, and the
/// background's threads (its blocking calls' too) run below the API's in priority.
fn background_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(BACKGROUND_THREADS)
        .thread_name("sarvcrawl-background")
        .on_thread_start(|| lower_priority(BACKGROUND_NICE))
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the background runtime: {e}"))
}

/// Closes the browser and the backend once everything stopped.
async fn finish(renderer: Option<Arc<Chromium>>, backend: backend::Backend) -> Result<(), String> {
    if let Some(r) = renderer {
        r.shutdown().await;
    }
    drop(backend);
    if let Some(report) = sarvcrawl_core::stages::report() {
        eprintln!("stage-cpu {report}");
    }
    tracing::info!("stopped");
    Ok(())
}

/// The headless browser for `render: true`, when rendering is on and Chromium is found; says
/// which at start-up.
fn renderer(args: &ServeArgs, user_agent: String) -> Result<Option<Arc<Chromium>>, String> {
    if args.no_render {
        tracing::info!("rendering (render: true) is off (--no-render)");
        return Ok(None);
    }
    let Some(executable) = sarvcrawl_render::locate(args.chromium.as_deref())
        .map_err(|e| format!("SARVCRAWL_CHROMIUM / --chromium: {e}"))?
    else {
        tracing::info!(
            "rendering (render: true) is not available: no Chromium on PATH; install it or set \
             SARVCRAWL_CHROMIUM"
        );
        return Ok(None);
    };
    tracing::info!(chromium = %executable.display(), "rendering (render: true) is available");
    let config = ChromiumConfig {
        executable,
        user_agent,
        max_pages: args.render_pages.max(1),
    };
    Ok(Some(Arc::new(Chromium::new(
        config,
        AddressPolicy::new(args.allow_nets.clone()),
    ))))
}

/// Starts the checks of due monitors once a second, and sweeps the active jobs every third of
/// the slot lease (at most every 10 s), until `stop` turns true.
async fn schedule(app: Arc<App>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let sweep_every =
        (app.config.slot_lease / 3).clamp(Duration::from_millis(500), Duration::from_secs(10));
    let mut last_sweep: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        if let Err(e) = sarvcrawl_core::app::monitor::tick(&app).await {
            tracing::warn!(error = %e, "monitor schedule failed");
        }
        if last_sweep.is_none_or(|t| t.elapsed() >= sweep_every) {
            last_sweep = Some(tokio::time::Instant::now());
            match sarvcrawl_core::app::sweep::sweep(&app).await {
                Ok(s) if s.repaired + s.failed + s.finished > 0 => {
                    tracing::warn!(
                        repaired = s.repaired,
                        failed = s.failed,
                        finished = s.finished,
                        "stalled jobs swept"
                    )
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "sweep failed"),
            }
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down");
}

/// The pauses of `--webhook-retries`.
#[derive(Debug, Clone)]
struct Retries(Vec<Duration>);

fn parse_retries(s: &str) -> Result<Retries, String> {
    sarvcrawl_core::app::webhook::parse_retries(s).map(Retries)
}
