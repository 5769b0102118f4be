//! The `dlq` function. Dead letters: record exhausted tasks as failed pages and end their jobs.

#[tokio::main]
async fn main() -> Result<(), sarvcrawl_aws::lambda::Error> {
    sarvcrawl_aws::lambda::dlq::run().await
}
