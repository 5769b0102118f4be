//! Fresh AWS resources on the emulator that `scripts/test.sh` starts (`AWS_ENDPOINT_URL`), made
//! from `template.yaml` under a prefix of their own, for tests that use the AWS adapters or the
//! Lambda handlers directly.

use sarvcrawl_aws::bootstrap::{bootstrap, Template};
use sarvcrawl_aws::{Clients, Names};
use std::sync::atomic::{AtomicUsize, Ordering};

/// New resources: their clients and names.
pub async fn resources() -> (Clients, Names) {
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "these tests need the AWS emulator: run scripts/test.sh"
    );
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    let suffix = ulid::Ulid::new().to_string().to_lowercase();
    let prefix = format!("s{}-{n}-{}", std::process::id(), &suffix[20..]);
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml"))
        .expect("template.yaml");
    let template = Template::parse(&text).expect("a readable template");
    let clients = Clients::from_env().await;
    let names = bootstrap(&clients, &template, &prefix)
        .await
        .expect("resources on the emulator");
    (clients, names)
}
