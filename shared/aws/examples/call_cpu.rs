//! The CPU one SDK call costs this process, against an endpoint that answers at once (so that
//! only the client's work is counted: building, signing and sending the request, reading and
//! parsing the answer). Run by `bench/sdk_calls.sh`, which serves such an endpoint with nginx.
//!
//!     AWS_ENDPOINT_URL=http://127.0.0.1:PORT call_cpu OPERATION CALLS AT_ONCE
//!
//! OPERATION: `get` (DynamoDB GetItem), `query` (DynamoDB Query), `put-object` (S3
//! PutObject of a 73 KB document, the generated benchmark site's average page), or
//! `wire-get`, `wire-query` and `wire-put` (the same three sent by the service's own client,
//! which the stores use, instead of the SDK's).

use aws_sdk_dynamodb::types::AttributeValue;
use sarvcrawl_aws::SendBy;
use std::time::Instant;

/// CPU seconds this process used so far (user and system).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

async fn call(clients: &sarvcrawl_aws::Clients, op: &str, body: &bytes::Bytes) {
    let dynamo = &clients.dynamo;
    let get = || {
        dynamo
            .get_item()
            .table_name("t")
            .key("PK", AttributeValue::S("JOB#u#j".into()))
            .key("SK", AttributeValue::S("URL#0123456789abcdef".into()))
    };
    let query = || {
        dynamo
            .query()
            .table_name("t")
            .key_condition_expression("PK = :pk AND SK BETWEEN :c AND :j")
            .expression_attribute_values(":pk", AttributeValue::S("JOB#u#j".into()))
            .expression_attribute_values(":c", AttributeValue::S("COUNT".into()))
            .expression_attribute_values(":j", AttributeValue::S("JOB".into()))
    };
    let done = match op {
        "get" => get().send().await.map(|_| ()).map_err(|e| e.to_string()),
        "wire-get" => get()
            .send_by(dynamo.wire())
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        "query" => query().send().await.map(|_| ()).map_err(|e| e.to_string()),
        "wire-query" => query()
            .send_by(dynamo.wire())
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        "wire-put" => dynamo
            .wire()
            .put_object(
                "b",
                "docs/j/0123456789abcdef.json",
                "application/json",
                body.clone(),
            )
            .await
            .map_err(|e| e.to_string()),
        _ => clients
            .s3
            .put_object()
            .bucket("b")
            .key("docs/j/0123456789abcdef.json")
            .body(body.clone().into())
            .send()
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
    };
    if let Err(e) = done {
        eprintln!("call failed: {e}");
        std::process::exit(1);
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let op = args.get(1).map_or("get", String::as_str).to_string();
    let calls: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5000);
    let at_once: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1).max(1);
    let clients = std::sync::Arc::new(sarvcrawl_aws::Clients::from_env().await);
    let body = bytes::Bytes::from(vec![b'x'; 73 * 1024]);
    // Warm up: connections, credentials, the SDK's caches.
    for _ in 0..100 {
        call(&clients, &op, &body).await;
    }
    let per_task = calls / at_once;
    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    let tasks: Vec<_> = (0..at_once)
        .map(|_| {
            let (clients, op, body) = (clients.clone(), op.clone(), body.clone());
            tokio::spawn(async move {
                for _ in 0..per_task {
                    call(&clients, &op, &body).await;
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    let (cpu, wall) = (cpu_seconds() - cpu0, wall0.elapsed().as_secs_f64());
    let n = (per_task * at_once) as f64;
    println!(
        "{op:<10} {at_once:>3} at once: {:>6.0} us of CPU a call, {:>6.0} calls/s",
        cpu * 1e6 / n,
        n / wall
    );
}
