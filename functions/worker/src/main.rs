//! The `worker` function. SQS batches of page tasks, with partial batch failures.

// One thread for the tasks, as `serve`'s background has: they wait on the network and hand
// every parse to the extraction pool.
#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<(), sarvcrawl_aws::lambda::Error> {
    sarvcrawl_aws::lambda::worker::run().await
}
