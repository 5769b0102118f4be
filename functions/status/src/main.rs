//! The `status` function. GET /api/health, /api/jobs, /api/jobs/{id}, /api/jobs/{id}/results,
//! /api/jobs/{id}/artifacts/{name}, /api/monitors and /api/monitors/{id}.

#[tokio::main]
async fn main() -> Result<(), sarvcrawl_aws::lambda::Error> {
    sarvcrawl_aws::lambda::http::run().await
}
