//! The `scheduler` function. EventBridge schedule: start the checks of due monitors, fail
//! stalled jobs and free their slots.

#[tokio::main]
async fn main() -> Result<(), sarvcrawl_aws::lambda::Error> {
    sarvcrawl_aws::lambda::scheduler::run().await
}
