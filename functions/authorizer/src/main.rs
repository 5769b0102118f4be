//! The `authorizer` function. The HTTP API's Lambda authorizer: API key to user id.

#[tokio::main]
async fn main() -> Result<(), sarvcrawl_aws::lambda::Error> {
    sarvcrawl_aws::lambda::authorizer::run().await
}
