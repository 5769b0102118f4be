//! The `cancel` function. DELETE /api/jobs/{id}/cancel, PATCH and DELETE /api/monitors/{id}.

#[tokio::main]
async fn main() -> Result<(), sarvcrawl_aws::lambda::Error> {
    sarvcrawl_aws::lambda::http::run().await
}
