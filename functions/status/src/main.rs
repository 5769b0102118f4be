//! The `status` function. GET /api/health, /api/jobs, /api/jobs/{id} and /api/jobs/{id}/results.

#[tokio::main]
async fn main() -> Result<(), sarvcrawl_aws::lambda::Error> {
    sarvcrawl_aws::lambda::http::run().await
}
