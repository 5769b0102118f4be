//! The `worker` function. SQS batches of page tasks, with partial batch failures.

#[tokio::main]
async fn main() -> Result<(), sarvcrawl_aws::lambda::Error> {
    sarvcrawl_aws::lambda::worker::run().await
}
