//! The `tree` function. GET /api/jobs/{id}/tree.

#[tokio::main]
async fn main() -> Result<(), sarvcrawl_aws::lambda::Error> {
    sarvcrawl_aws::lambda::http::run().await
}
