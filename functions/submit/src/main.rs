//! The `submit` function. POST /api/scrape, /api/crawl, /api/batch/scrape, /api/map,
//! /api/search, /api/upload and /api/monitors: validate, store the job with its claim, queue
//! it, answer 202 (the route's use case: `scrape::submit`, `crawl::submit`, ... in
//! `shared/core/src/app/`).

#[tokio::main]
async fn main() -> Result<(), sarvcrawl_aws::lambda::Error> {
    sarvcrawl_aws::lambda::http::run().await
}
