//! Spawning `sarvcrawl serve` and talking to its API.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `sarvcrawl` binary: `SARVCRAWL_BIN`, or the one built beside the test executable.
pub fn binary() -> PathBuf {
    if let Ok(p) = std::env::var("SARVCRAWL_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory");
    dir.join("sarvcrawl")
}

/// Whether the suite runs against the AWS backend (`SARVCRAWL_TEST_BACKEND=aws`, with
/// `AWS_ENDPOINT_URL` pointing at an emulator) rather than the local one.
pub fn aws_backend() -> bool {
    std::env::var("SARVCRAWL_TEST_BACKEND").is_ok_and(|b| b == "aws")
}

/// The emulators new resources are made on: `SARVCRAWL_TEST_EMULATORS` may name several
/// endpoints (space-separated) so that no one emulator sets the pace of the whole run.
fn emulators() -> Vec<String> {
    std::env::var("SARVCRAWL_TEST_EMULATORS")
        .map(|pool| pool.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Running servers on each emulator of [`emulators`].
static SERVERS_ON: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

/// The emulator of the pool with the fewest running servers, and its place in the pool;
/// counted as one more server's when `hold`, until [`leave_emulator`]. None without a pool
/// (resources go to `AWS_ENDPOINT_URL`).
fn pick_emulator(hold: bool) -> Option<(usize, String)> {
    let pool = emulators();
    let mut load = SERVERS_ON.lock().unwrap_or_else(|e| e.into_inner());
    load.resize(pool.len(), 0);
    let (place, _) = load.iter().enumerate().min_by_key(|(_, n)| **n)?;
    if hold {
        load[place] += 1;
    }
    Some((place, pool[place].clone()))
}

fn leave_emulator(place: usize) {
    let mut load = SERVERS_ON.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = load.get_mut(place) {
        *n = n.saturating_sub(1);
    }
}

/// Creates fresh AWS resources for one server and returns their `SARVCRAWL_*` variables, and
/// `AWS_ENDPOINT_URL` when they are on an emulator of [`emulators`].
pub fn bootstrap_aws() -> Vec<(String, String)> {
    bootstrap_aws_on(pick_emulator(false).map(|(_, endpoint)| endpoint))
}

fn bootstrap_aws_on(endpoint: Option<String>) -> Vec<(String, String)> {
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let prefix = format!("t{}-{n}-{nanos}", std::process::id());
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
    let mut cmd = Command::new(binary());
    cmd.args(["aws", "bootstrap", "--prefix", &prefix, "--template"])
        .arg(template);
    if let Some(endpoint) = &endpoint {
        cmd.env("AWS_ENDPOINT_URL", endpoint);
    }
    let out = cmd.output().expect("run sarvcrawl aws bootstrap");
    assert!(
        out.status.success(),
        "bootstrap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain(endpoint.map(|e| ("AWS_ENDPOINT_URL".to_string(), e)))
        .collect()
}

/// Worker processes beside the API process on the AWS backend: the queue is worked by several
/// processes at once, as Lambda runs many worker containers.
pub const AWS_WORKER_PROCESSES: usize = 3;

/// A running `sarvcrawl serve`, killed when dropped. On the AWS backend it is one process
/// serving the API (`--workers 0`) and [`AWS_WORKER_PROCESSES`] `--workers-only` processes
/// on the same resources.
pub struct Serve {
    child: Option<Child>,
    workers: Vec<Child>,
    /// Whether it runs on the AWS backend, with worker processes beside the API process.
    aws: bool,
    /// The place in the pool of [`emulators`] of the emulator its resources are on.
    emulator: Option<usize>,
    pub base: String,
    pub data_dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    addr_file: PathBuf,
    /// The address to listen on.
    listen: String,
}

impl Serve {
    /// Starts a server allowed to fetch from 127.0.0.1 (and nothing else blocked by default).
    pub fn start() -> Serve {
        Serve::with(&["--allow-net", "127.0.0.1/32"], &[])
    }

    /// Starts a server with extra arguments and environment variables, on the backend the
    /// suite runs against.
    pub fn with(args: &[&str], envs: &[(&str, &str)]) -> Serve {
        let envs: Vec<(String, String)> = envs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if aws_backend() {
            Serve::on_aws("127.0.0.1:0", args, envs)
        } else {
            Serve::spawned("127.0.0.1:0", args, envs)
        }
    }

    /// Starts a server on the AWS backend (fresh resources on the emulator) whatever the suite
    /// runs against, listening on `listen`; `envs` may name the resources to use.
    pub fn on_aws(listen: &str, args: &[&str], mut envs: Vec<(String, String)>) -> Serve {
        let mut args: Vec<&str> = args.to_vec();
        args.extend(["--backend", "aws"]);
        if !args.contains(&"--visibility-timeout") {
            args.extend(["--visibility-timeout", "30"]);
        }
        let mut emulator = None;
        if !envs.iter().any(|(k, _)| k == "SARVCRAWL_TABLE") {
            // A caller that names the endpoint (a proxy in front of the emulator) gets its
            // resources on the emulator of `AWS_ENDPOINT_URL`, behind that proxy.
            let named = envs.iter().any(|(k, _)| k == "AWS_ENDPOINT_URL");
            emulator = (!named).then(|| pick_emulator(true)).flatten();
            envs.extend(bootstrap_aws_on(emulator.clone().map(|(_, e)| e)));
        }
        let mut serve = Serve::spawned_with(listen, &args, envs, true);
        serve.emulator = emulator.map(|(place, _)| place);
        serve
    }

    /// Starts a server on the local backend whatever the suite runs against.
    pub fn on_local(args: &[&str]) -> Serve {
        Serve::spawned("127.0.0.1:0", args, Vec::new())
    }

    fn spawned(listen: &str, args: &[&str], envs: Vec<(String, String)>) -> Serve {
        Serve::spawned_with(listen, args, envs, false)
    }

    fn spawned_with(listen: &str, args: &[&str], envs: Vec<(String, String)>, aws: bool) -> Serve {
        let tmp = tempfile::tempdir().expect("temp dir");
        let mut s = Serve {
            child: None,
            workers: Vec::new(),
            aws,
            emulator: None,
            base: String::new(),
            addr_file: tmp.path().join("addr"),
            data_dir: tmp.path().join("data"),
            _tmp: Some(tmp),
            args: args.iter().map(|s| s.to_string()).collect(),
            envs,
            listen: listen.to_string(),
        };
        s.spawn();
        s
    }

    /// Starts the server on a port of its own choosing (port 0) and learns the port from the
    /// file the server writes once it listens: no other test's server can be taken for it.
    fn spawn(&mut self) {
        let _ = std::fs::remove_file(&self.addr_file);
        let loops = self
            .args
            .iter()
            .position(|a| a == "--workers")
            .and_then(|i| self.args.get(i + 1));
        let processes = if self.aws && loops.is_none_or(|n| n != "0") {
            AWS_WORKER_PROCESSES
        } else {
            0
        };
        for _ in 0..processes {
            let mut args = self.args.clone();
            if !args.iter().any(|a| a == "--workers") {
                args.extend(["--workers".to_string(), "1".to_string()]);
            }
            args.push("--workers-only".into());
            let worker = self.command(&args).spawn().expect("spawn a worker process");
            self.workers.push(worker);
        }
        let mut args = self.args.clone();
        if processes > 0 {
            // The API process leaves the queue to the worker processes.
            match args.iter().position(|a| a == "--workers") {
                Some(i) if i + 1 < args.len() => args[i + 1] = "0".into(),
                _ => args.extend(["--workers".to_string(), "0".to_string()]),
            }
        }
        let mut cmd = self.command(&args);
        cmd.arg("--addr")
            .arg(&self.listen)
            .arg("--addr-file")
            .arg(&self.addr_file);
        let child = cmd.spawn().expect("spawn sarvcrawl serve");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(addr) = std::fs::read_to_string(&self.addr_file) {
                // A server on every address is reached on loopback.
                let addr = addr.trim().replace("0.0.0.0:", "127.0.0.1:");
                self.base = format!("http://{addr}");
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("sarvcrawl serve exited at start-up: {status}");
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("sarvcrawl serve did not start listening");
    }

    /// `sarvcrawl serve` with `args` on this server's data directory and environment.
    fn command(&self, args: &[String]) -> Command {
        let mut cmd = Command::new(binary());
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(args)
            .env_remove("SARVCRAWL_API_KEYS")
            .env_remove("SARVCRAWL_ALLOW_NETS")
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        cmd
    }

    /// The server's process id (the API process's).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether every process of the server is still running (the same ones since they
    /// started).
    pub fn running(&mut self) -> bool {
        matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(None)))
            && self
                .workers
                .iter_mut()
                .all(|w| matches!(w.try_wait(), Ok(None)))
    }

    /// The largest peak resident memory of the server's processes so far, in KiB (`VmHWM`).
    pub fn peak_rss_kib(&self) -> u64 {
        let peak = |pid: u32| -> u64 {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("VmHWM:"))
                        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
                })
                .unwrap_or(0)
        };
        self.child
            .iter()
            .chain(&self.workers)
            .map(|c| peak(c.id()))
            .max()
            .unwrap_or(0)
    }

    /// Kills the server's processes at once (SIGKILL): nothing gets to shut down cleanly.
    pub fn kill(&mut self) {
        for mut c in self.child.take().into_iter().chain(self.workers.drain(..)) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same data directory (and a fresh port: clients must
    /// take the new `base`).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Starts the server again (as [`Serve::restart`]) with other arguments.
    pub fn restart_with(&mut self, args: &[&str]) {
        self.args = args.iter().map(|s| s.to_string()).collect();
        if self.aws {
            self.args
                .extend(["--backend", "aws", "--visibility-timeout", "30"].map(String::from));
        }
        self.restart();
    }

    /// Stops the server as an operator would (SIGTERM), waits for it to exit, and starts it
    /// again.
    pub fn restart_gracefully(&mut self) {
        let mut children: Vec<Child> = self.child.take().into_iter().collect();
        children.append(&mut self.workers);
        for c in &children {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for mut c in children {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        self.spawn();
    }

    /// Makes every document write fail: on the local backend a file stands where the user's
    /// document directory belongs; on AWS the server is restarted on a bucket that does not
    /// exist.
    pub fn break_documents(&mut self) {
        if aws_backend() {
            let bucket = self.env("SARVCRAWL_BUCKET");
            self.envs
                .push(("SARVCRAWL_BUCKET".into(), format!("{bucket}-missing")));
            self.restart();
        } else {
            let documents = self.data_dir.join("documents");
            std::fs::create_dir_all(&documents).expect("documents dir");
            std::fs::write(documents.join("local"), b"in the way").expect("block documents");
        }
    }

    /// Undoes [`Serve::break_documents`].
    pub fn repair_documents(&mut self) {
        if aws_backend() {
            self.envs.pop();
            self.restart();
        } else {
            std::fs::remove_file(self.data_dir.join("documents/local")).expect("unblock documents");
        }
    }

    /// The value of one of the server's environment variables (empty when unset).
    pub fn env(&self, name: &str) -> String {
        self.envs
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }

    /// A client of this server with an optional API key.
    pub fn api(&self, key: Option<&str>) -> Api {
        Api {
            base: self.base.clone(),
            key: key.map(str::to_string),
            http: reqwest::Client::new(),
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill();
        if let Some(place) = self.emulator {
            leave_emulator(place);
        }
    }
}

/// A client of the API.
#[derive(Clone)]
pub struct Api {
    pub base: String,
    key: Option<String>,
    pub http: reqwest::Client,
}

/// A response: status, headers and JSON body (Null when the body is not JSON).
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Reply {
    /// Reads a response whole.
    pub async fn read(resp: reqwest::Response) -> Reply {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.expect("response body");
        Reply {
            status,
            headers,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Api {
    /// The API key this client sends.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    pub async fn send(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> Reply {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(k) = &self.key {
            req = req.bearer_auth(k);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        Reply::read(req.send().await.expect("request to sarvcrawl")).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(reqwest::Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send(reqwest::Method::DELETE, path, None).await
    }

    /// Submits and expects 202; returns the job id.
    pub async fn submit(&self, kind: &str, body: &Value) -> String {
        let r = self.post(&format!("/api/{kind}"), body).await;
        assert_eq!(r.status, 202, "submit {kind}: {}", r.body);
        r.body["job_id"].as_str().expect("job_id").to_string()
    }

    /// Submits a job and waits for its end: `(job_id, final job)`.
    pub async fn run(&self, kind: &str, body: &Value, timeout: Duration) -> (String, Value) {
        let id = self.submit(kind, body).await;
        let job = self.wait(&id, timeout).await;
        (id, job)
    }

    pub async fn job(&self, id: &str) -> Value {
        let r = self.get(&format!("/api/jobs/{id}")).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    }

    /// Polls until the job is final (or panics after `timeout`).
    pub async fn wait(&self, id: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let job = self.job(id).await;
            if matches!(
                job["status"].as_str(),
                Some("completed" | "failed" | "cancelled")
            ) {
                return job;
            }
            assert!(
                Instant::now() < deadline,
                "job {id} not final in time: {job}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls until at least `pages` of the job's pages are completed (or panics after
    /// `timeout`).
    pub async fn wait_for_pages(&self, id: &str, pages: u64, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.job(id).await["progress"]["pages_completed"]
            .as_u64()
            .unwrap_or(0)
            < pages
        {
            assert!(
                Instant::now() < deadline,
                "job {id}: {pages} pages not done in time"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Every document of a job, following `next_cursor`.
    pub async fn all_results(&self, id: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(c) => format!("/api/jobs/{id}/results?limit=100&cursor={c}"),
                None => format!("/api/jobs/{id}/results?limit=100"),
            };
            let r = self.get(&path).await;
            assert_eq!(r.status, 200, "{}", r.body);
            out.extend(r.body["data"].as_array().cloned().unwrap_or_default());
            match r.body["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return out,
            }
        }
    }

    /// Every log entry of a job.
    pub async fn all_logs(&self, id: &str) -> Vec<Value> {
        let r = self.get(&format!("/api/jobs/{id}/logs?limit=1000")).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["entries"].as_array().cloned().unwrap_or_default()
    }
}
