//! The `render` function: SQS batches of tasks whose pages load in headless Chromium. It runs
//! as a container image with Chromium inside (`infra/render.Dockerfile`), fed by a queue of
//! its own so rendering never slows plain fetches.

use sarvcrawl_core::ports::Renderer;
use sarvcrawl_render::{Chromium, ChromiumConfig};
use std::sync::Arc;

/// Pages one function instance renders at once.
const PAGES: usize = 2;

#[tokio::main]
async fn main() -> Result<(), sarvcrawl_aws::lambda::Error> {
    let explicit = std::env::var_os("SARVCRAWL_CHROMIUM").map(std::path::PathBuf::from);
    let executable = sarvcrawl_render::locate(explicit.as_deref())?
        .ok_or("no Chromium in the image: set SARVCRAWL_CHROMIUM")?;
    sarvcrawl_aws::lambda::worker::run_rendering(Box::new(move |policy, user_agent| {
        let config = ChromiumConfig {
            executable,
            user_agent: user_agent.to_string(),
            max_pages: PAGES,
        };
        Arc::new(Chromium::new(config, policy)) as Arc<dyn Renderer>
    }))
    .await
}
