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

/// The resources' ARNs as the emulator names them.
struct Arns {
    table: String,
    bucket: String,
    queues: std::collections::HashMap<&'static str, String>,
}

const ACCOUNT: &str = "123456789012";

fn queue_arn(url: &str) -> String {
    let name = url.rsplit('/').next().unwrap_or_default();
    format!("arn:aws:sqs:us-east-1:{ACCOUNT}:{name}")
}

impl Arns {
    fn of(names: &Names) -> Arns {
        let mut queues =
            std::collections::HashMap::from([("WorkQueue", queue_arn(&names.queue_url))]);
        if let Some(dlq) = &names.dlq_url {
            queues.insert("DeadLetterQueue", queue_arn(dlq));
        }
        if let Some(render) = &names.render_queue_url {
            queues.insert("RenderQueue", queue_arn(render));
        }
        Arns {
            table: format!("arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/{}", names.table),
            bucket: format!("arn:aws:s3:::{}", names.bucket),
            queues,
        }
    }

    /// `Resource.Arn` of the template.
    fn get_att(&self, what: &str) -> String {
        match what {
            "Table.Arn" => self.table.clone(),
            "Bucket.Arn" => self.bucket.clone(),
            other => {
                let resource = other.trim_end_matches(".Arn");
                self.queues
                    .get(resource)
                    .cloned()
                    .unwrap_or_else(|| panic!("no ARN for {other} in this test's resources"))
            }
        }
    }

    /// A policy value of the template with its intrinsic functions resolved; `None` for
    /// `!Ref AWS::NoValue`.
    fn resolve(&self, v: &serde_yaml::Value, render: bool) -> Option<serde_json::Value> {
        use serde_yaml::Value;
        Some(match v {
            Value::Tagged(t) if t.tag == "!GetAtt" => {
                serde_json::Value::String(self.get_att(t.value.as_str().unwrap_or_default()))
            }
            Value::Tagged(t) if t.tag == "!Sub" => {
                let mut text = t.value.as_str().unwrap_or_default().to_string();
                for att in ["Table.Arn", "Bucket.Arn"] {
                    text = text.replace(&format!("${{{att}}}"), &self.get_att(att));
                }
                serde_json::Value::String(text)
            }
            Value::Tagged(t) if t.tag == "!Ref" => {
                assert_eq!(t.value.as_str(), Some("AWS::NoValue"), "unresolved {v:?}");
                return None;
            }
            Value::Tagged(t) if t.tag == "!If" => {
                let args = t.value.as_sequence().expect("!If arguments");
                assert_eq!(args[0].as_str(), Some("RenderEnabled"), "condition {v:?}");
                return self.resolve(&args[if render { 1 } else { 2 }], render);
            }
            Value::Sequence(items) => serde_json::Value::Array(
                items
                    .iter()
                    .filter_map(|i| self.resolve(i, render))
                    .collect(),
            ),
            Value::Mapping(m) => serde_json::Value::Object(
                m.iter()
                    .filter_map(|(k, v)| Some((k.as_str()?.to_string(), self.resolve(v, render)?)))
                    .collect(),
            ),
            other => serde_json::to_value(other).expect("a plain value"),
        })
    }
}

/// The template read as data.
fn template() -> serde_yaml::Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml"))
        .expect("template.yaml");
    serde_yaml::from_str(&text).expect("template.yaml parses")
}

/// The IAM policy `template.yaml` gives `function` (e.g. `SubmitFunction`), its resources
/// resolved to `names`' ARNs on the emulator.
pub fn policy_of(function: &str, names: &Names) -> serde_json::Value {
    let t = template();
    let policies = &t["Resources"][function]["Properties"]["Policies"];
    let arns = Arns::of(names);
    let render = names.render_queue_url.is_some();
    let mut statements = Vec::new();
    for p in policies.as_sequence().expect("the function has policies") {
        let resolved = arns.resolve(p, render).expect("a policy");
        statements.extend(
            resolved["Statement"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
    }
    serde_json::json!({"Version": "2012-10-17", "Statement": statements})
}

/// The function serving `method` and `path` (a route key of the HTTP API, such as
/// `/api/jobs/{id}`) in `template.yaml`.
pub fn function_of_route(method: &str, path: &str) -> String {
    let t = template();
    let resources = t["Resources"].as_mapping().expect("resources");
    for (name, r) in resources {
        let Some(events) = r["Properties"]["Events"].as_mapping() else {
            continue;
        };
        for e in events.values() {
            let p = &e["Properties"];
            if e["Type"].as_str() == Some("HttpApi")
                && p["Method"].as_str() == Some(method)
                && p["Path"].as_str() == Some(path)
            {
                return name.as_str().unwrap_or_default().to_string();
            }
        }
    }
    panic!("no function serves {method} {path}")
}

/// Clients acting as `function` would on AWS: with credentials whose only policy is the one
/// `template.yaml` gives it (IAM is enforced by the emulator).
pub async fn clients_of(function: &str, names: &Names) -> Clients {
    clients_with(function, policy_of(function, names)).await
}

/// Clients whose only policy is `policy`.
pub async fn clients_with(name: &str, policy: serde_json::Value) -> Clients {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").expect("the AWS emulator");
    static N: AtomicUsize = AtomicUsize::new(0);
    let user = format!(
        "{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let key: serde_json::Value = reqwest::Client::new()
        .post(format!("{endpoint}/_sarvcrawl/principal"))
        .json(&serde_json::json!({"name": user, "policy": policy}))
        .send()
        .await
        .expect("the emulator's principal endpoint")
        .json()
        .await
        .expect("an access key");
    let credentials = aws_sdk_dynamodb::config::Credentials::new(
        key["access_key_id"].as_str().expect("key id"),
        key["secret_access_key"].as_str().expect("secret"),
        None,
        None,
        "emulator",
    );
    Clients::load(aws_config::from_env().credentials_provider(credentials)).await
}
