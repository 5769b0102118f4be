//! The `submit` function. POST /api/scrape and /api/crawl: validate, store the job with its slot, queue it, answer 202.

#[tokio::main]
async fn main() -> Result<(), sarvcrawl_aws::lambda::Error> {
    sarvcrawl_aws::lambda::http::run().await
}
