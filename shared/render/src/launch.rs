//! Starting a headless Chromium process and ending it: a fresh profile directory per browser,
//! every flag that keeps it quiet and contained, and a kill when the process that started it
//! goes away, however it goes.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long Chromium may take to open its DevTools endpoint.
const START: Duration = Duration::from_secs(30);

/// Flags of every browser: headless, no background traffic or updates, no GPU, no UDP (WebRTC
/// over proxied TCP only, no QUIC), and a proxy that refuses everything for any request outside
/// the contexts the renderer creates (each of those has a proxy of its own). Renderer processes fork from Chromium's zygote, which makes
/// a page's new process about a third cheaper than starting one from scratch.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-breakpad",
    "--disable-client-side-phishing-detection",
    "--disable-domain-reliability",
    "--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider,SpareRendererForSitePerProcess",
    "--no-first-run",
    "--no-default-browser-check",
    "--metrics-recording-only",
    "--mute-audio",
    "--hide-scrollbars",
    "--password-store=basic",
    "--use-mock-keychain",
    // S11: no UDP leaves a page. WebRTC may use proxied TCP only (the proxy checks every
    // destination), and QUIC is off.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-quic",
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--remote-debugging-port=0",
    "--remote-debugging-address=127.0.0.1",
];

/// A running browser process; killed, and its profile removed, when dropped.
pub(crate) struct Process {
    child: Mutex<Child>,
    endpoint: String,
    profile: PathBuf,
}

impl Process {
    /// The DevTools WebSocket URL of the browser.
    pub(crate) fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    /// The browser's process id.
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.lock().ok().and_then(|c| c.id())
    }

    /// Whether the browser process still runs (one that ended is reaped here).
    pub(crate) fn running(&self) -> bool {
        self.child
            .lock()
            .is_ok_and(|mut c| matches!(c.try_wait(), Ok(None)))
    }
}

/// How long a dropped browser is given to end before its profile is removed regardless (a
/// killed one ends in milliseconds; the thread that drops it waits that long).
const END: Duration = Duration::from_secs(2);
/// Tries at removing a profile: a helper process the browser left (its zygote, a renderer)
/// may still write into it until it notices its parent gone, and a removal that finds a new
/// file fails.
const REMOVE_TRIES: u32 = 10;

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(c) = self.child.get_mut() {
            if c.start_kill().is_ok() {
                let until = std::time::Instant::now() + END;
                while matches!(c.try_wait(), Ok(None)) && std::time::Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
        for _ in 0..REMOVE_TRIES {
            match std::fs::remove_dir_all(&self.profile) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => break,
            }
        }
    }
}

/// How a profile directory's name starts; the id of the process that made it follows.
const PROFILE_PREFIX: &str = "sarvcrawl-chromium-";

/// Starts `executable` headless and waits for its DevTools endpoint.
pub(crate) async fn launch(executable: &Path) -> std::io::Result<Process> {
    let temp = std::env::temp_dir();
    let sweep = temp.clone();
    // Off the runtime's threads: a long-lived machine may have many to remove.
    let _ = tokio::task::spawn_blocking(move || remove_stale_profiles(&sweep)).await;
    let profile = temp.join(format!(
        "{PROFILE_PREFIX}{}-{}",
        std::process::id(),
        ulid_like()
    ));
    std::fs::create_dir_all(&profile)?;
    let mut cmd = Command::new(executable);
    cmd.args(FLAGS)
        .arg(format!("--user-data-dir={}", profile.display()))
        // Chromium's own temporary files (its singleton socket's directory, shared memory)
        // go in the profile, and so go with it.
        .env("TMPDIR", &profile)
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    die_with_parent(&mut cmd);
    let mut child = cmd.spawn()?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| std::io::Error::other("no stderr"))?;
    let mut lines = BufReader::new(stderr).lines();
    let endpoint = tokio::time::timeout(START, async {
        while let Some(line) = lines.next_line().await? {
            if let Some(url) = line.trim().strip_prefix("DevTools listening on ") {
                return Ok(url.to_string());
            }
        }
        Err(std::io::Error::other("Chromium exited before it listened"))
    })
    .await
    .map_err(|_| std::io::Error::other("Chromium did not start in time"))?;
    let endpoint = match endpoint {
        Ok(e) => e,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&profile);
            return Err(e);
        }
    };
    // Keep reading so a chatty browser never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Process {
        child: Mutex::new(child),
        endpoint,
        profile,
    })
}

/// Removes the profile directories in `dir` of processes that no longer run: a process killed
/// outright (SIGKILL, the OOM killer, a crash) never gets to remove its browser's profile, and a
/// server restarted many times must not fill its disk with them.
fn remove_stale_profiles(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let owner = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix(PROFILE_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok());
        if owner.is_some_and(|pid| pid > 0 && !runs(pid)) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether a process with this id exists (signal 0 checks without sending anything).
fn runs(pid: i32) -> bool {
    // SAFETY: signal 0 delivers nothing; `pid` is positive, so it names one process.
    let status = unsafe { libc::kill(pid, 0) };
    status == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// A unique suffix for a profile directory.
fn ulid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{nanos:x}-{}", N.fetch_add(1, Ordering::Relaxed))
}

/// Linux: the kernel kills the browser when the thread that started it ends, so a worker that
/// is killed outright leaves no browser behind.
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: `prctl` is async-signal-safe and touches only the forked child's own state.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_: &mut Command) {}
