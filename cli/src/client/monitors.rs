//! The `monitor` commands: add, list, show, pause, resume and remove monitors.

use super::api::{Api, Body};
use super::args::MonitorCommand;
use super::{s, Failure, Out};
use sarvcrawl_core::domain::{MonitorPatch, MonitorRequest, MonitorStatus};
use serde_json::{json, Value};

/// Runs a monitor subcommand.
pub async fn run(api: &Api, out: &Out, cmd: MonitorCommand) -> Result<(), Failure> {
    let show = |m: &Value| {
        format!(
            "{} {} {} every {} s; {} checks, {} changes; next {}",
            s(&m["monitor_id"]),
            s(&m["status"]),
            s(&m["url"]),
            s(&m["interval_seconds"]),
            s(&m["checks"]),
            s(&m["changes"]),
            s(&m["next_check_at"])
        )
    };
    let patch = |id: &str, status: MonitorStatus| {
        let path = format!("/api/monitors/{id}");
        let change = MonitorPatch {
            status: Some(status),
            ..MonitorPatch::default()
        };
        let body = Body::Json(json!(change));
        async move { api.send(reqwest::Method::PATCH, &path, &body, None).await }
    };
    match cmd {
        MonitorCommand::Add {
            url,
            notify,
            interval,
            selector,
        } => {
            let parse = |what: &str, u: &str| {
                url::Url::parse(u).map_err(|e| Failure::Usage(format!("{what} {u:?}: {e}")))
            };
            let mut req = MonitorRequest::new(parse("url", &url)?, parse("--notify", &notify)?);
            req.interval_seconds = interval.unwrap_or(req.interval_seconds);
            req.selector = selector;
            let r = api.submit("/api/monitors", Body::Json(json!(req))).await?;
            out.line(&r.body, || {
                format!(
                    "monitor {}\nsecret {} (shown once: keep it to verify webhooks)\nfirst check: job {}",
                    s(&r.body["monitor_id"]),
                    s(&r.body["secret"]),
                    s(&r.body["job_id"])
                )
            });
        }
        MonitorCommand::List => {
            let r = api.get("/api/monitors").await?;
            for m in r.body["monitors"].as_array().cloned().unwrap_or_default() {
                out.line(&m, || show(&m));
            }
        }
        MonitorCommand::Show { id } => {
            let m = api.get(&format!("/api/monitors/{id}")).await?.body;
            out.line(&m, || show(&m));
        }
        MonitorCommand::Pause { id } => {
            let m = patch(&id, MonitorStatus::Paused).await?.body;
            out.line(&m, || show(&m));
        }
        MonitorCommand::Resume { id } => {
            let m = patch(&id, MonitorStatus::Active).await?.body;
            out.line(&m, || show(&m));
        }
        MonitorCommand::Rm { id } => {
            let path = format!("/api/monitors/{id}");
            api.send(reqwest::Method::DELETE, &path, &Body::None, None)
                .await?;
            out.line(&json!({"monitor_id": id, "deleted": true}), || {
                format!("{id} deleted")
            });
        }
    }
    Ok(())
}
