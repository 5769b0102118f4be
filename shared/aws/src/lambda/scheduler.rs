//! The scheduler: on an EventBridge schedule, starts the checks of due monitors and sweeps the
//! active jobs (slots of live jobs renewed, stalled jobs repaired, finished or failed).

use sarvcrawl_core::app::sweep::sweep;

/// Runs the scheduler function until the runtime stops it.
pub async fn run() -> Result<(), super::Error> {
    super::init_tracing();
    let deployment = super::Deployment::from_env().await?;
    let app = deployment.app.clone();
    lambda_runtime::run(lambda_runtime::service_fn(
        move |_event: lambda_runtime::LambdaEvent<serde_json::Value>| {
            let app = app.clone();
            async move {
                let checks = sarvcrawl_core::app::monitor::tick(&app).await?;
                let swept = sweep(&app).await?;
                tracing::info!(checks, ?swept, "schedule done");
                Ok::<_, super::Error>(serde_json::json!({"checks": checks, "swept": swept}))
            }
        },
    ))
    .await
}
