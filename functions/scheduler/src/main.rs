//! The `scheduler` function. EventBridge schedule: fail stalled jobs and free their slots.

#[tokio::main]
async fn main() -> Result<(), sarvcrawl_aws::lambda::Error> {
    sarvcrawl_aws::lambda::scheduler::run().await
}
