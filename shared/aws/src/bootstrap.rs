//! Creating a deployment's table, queues and bucket from the definitions in `template.yaml`,
//! so a local emulator (or an account without CloudFormation) gets exactly what the template
//! declares.

use crate::{Clients, Names};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
    LocalSecondaryIndex, Projection, ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;
use serde_yaml::Value;
use std::collections::HashMap;

/// A template that cannot be used, or a resource that could not be created.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("template: {0}")]
    Template(String),
    #[error("{0}")]
    Aws(String),
}

fn aws(e: impl std::fmt::Display) -> BootstrapError {
    BootstrapError::Aws(e.to_string())
}

fn tpl(msg: impl Into<String>) -> BootstrapError {
    BootstrapError::Template(msg.into())
}

/// `template.yaml` read as data, with `!Ref` and `!Sub` of parameters resolved to their
/// defaults.
pub struct Template {
    root: Value,
    params: HashMap<String, String>,
}

impl Template {
    pub fn parse(text: &str) -> Result<Self, BootstrapError> {
        let root: Value = serde_yaml::from_str(text).map_err(|e| tpl(e.to_string()))?;
        let mut params = HashMap::new();
        if let Some(Value::Mapping(ps)) = root.get("Parameters") {
            for (k, v) in ps {
                if let (Some(k), Some(d)) = (k.as_str(), v.get("Default")) {
                    params.insert(k.to_string(), scalar(d).unwrap_or_default());
                }
            }
        }
        Ok(Template { root, params })
    }

    fn properties(&self, resource: &str) -> Result<&Value, BootstrapError> {
        self.root
            .get("Resources")
            .and_then(|r| r.get(resource))
            .and_then(|r| r.get("Properties"))
            .ok_or_else(|| tpl(format!("no Resources.{resource}.Properties")))
    }

    /// A scalar property, resolving parameter references.
    fn resolve(&self, v: &Value) -> Option<String> {
        match v {
            Value::Tagged(t) if t.tag == "!Ref" => t
                .value
                .as_str()
                .and_then(|name| self.params.get(name).cloned()),
            Value::Tagged(t) if t.tag == "!Sub" => {
                let mut text = t.value.as_str()?.to_string();
                for (k, val) in &self.params {
                    text = text.replace(&format!("${{{k}}}"), val);
                }
                (!text.contains("${")).then_some(text)
            }
            other => scalar(other),
        }
    }
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn str_at<'a>(v: &'a Value, k: &str) -> Result<&'a str, BootstrapError> {
    v.get(k)
        .and_then(Value::as_str)
        .ok_or_else(|| tpl(format!("missing {k}")))
}

fn key_schema(v: &Value) -> Result<Vec<KeySchemaElement>, BootstrapError> {
    let list = v
        .get("KeySchema")
        .and_then(Value::as_sequence)
        .ok_or_else(|| tpl("missing KeySchema"))?;
    list.iter()
        .map(|k| {
            KeySchemaElement::builder()
                .attribute_name(str_at(k, "AttributeName")?)
                .key_type(KeyType::from(str_at(k, "KeyType")?))
                .build()
                .map_err(aws)
        })
        .collect()
}

fn projection(v: &Value) -> Result<Projection, BootstrapError> {
    let p = v
        .get("Projection")
        .ok_or_else(|| tpl("missing Projection"))?;
    let mut b =
        Projection::builder().projection_type(ProjectionType::from(str_at(p, "ProjectionType")?));
    if let Some(Value::Sequence(attrs)) = p.get("NonKeyAttributes") {
        for a in attrs.iter().filter_map(Value::as_str) {
            b = b.non_key_attributes(a);
        }
    }
    Ok(b.build())
}

/// Creates the table, queues and bucket named after `prefix` as `template.yaml` declares them.
pub async fn bootstrap(
    clients: &Clients,
    template: &Template,
    prefix: &str,
) -> Result<Names, BootstrapError> {
    let prefix = prefix.to_ascii_lowercase();
    let names_table = format!("{prefix}-jobs");

    // The table, its indexes and TTL.
    let t = template.properties("Table")?;
    let mut create = clients
        .dynamo
        .create_table()
        .table_name(&names_table)
        .billing_mode(BillingMode::from(str_at(t, "BillingMode")?));
    for a in t
        .get("AttributeDefinitions")
        .and_then(Value::as_sequence)
        .ok_or_else(|| tpl("missing AttributeDefinitions"))?
    {
        create = create.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(str_at(a, "AttributeName")?)
                .attribute_type(ScalarAttributeType::from(str_at(a, "AttributeType")?))
                .build()
                .map_err(aws)?,
        );
    }
    create = create.set_key_schema(Some(key_schema(t)?));
    for g in t
        .get("GlobalSecondaryIndexes")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
    {
        create = create.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(str_at(g, "IndexName")?)
                .set_key_schema(Some(key_schema(g)?))
                .projection(projection(g)?)
                .build()
                .map_err(aws)?,
        );
    }
    for l in t
        .get("LocalSecondaryIndexes")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
    {
        create = create.local_secondary_indexes(
            LocalSecondaryIndex::builder()
                .index_name(str_at(l, "IndexName")?)
                .set_key_schema(Some(key_schema(l)?))
                .projection(projection(l)?)
                .build()
                .map_err(aws)?,
        );
    }
    match create.send().await {
        Ok(_) => {}
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_in_use_exception()) => {}
        Err(e) => return Err(aws(aws_sdk_dynamodb::error::DisplayErrorContext(e))),
    }
    if let Some(ttl) = t.get("TimeToLiveSpecification") {
        let spec = TimeToLiveSpecification::builder()
            .attribute_name(str_at(ttl, "AttributeName")?)
            .enabled(true)
            .build()
            .map_err(aws)?;
        // Already enabled is fine.
        let _ = clients
            .dynamo
            .update_time_to_live()
            .table_name(&names_table)
            .time_to_live_specification(spec)
            .send()
            .await;
    }

    // The dead-letter queue, then the work queue that redrives to it.
    let dlq_props = template.properties("DeadLetterQueue")?;
    let mut dlq = clients
        .sqs
        .create_queue()
        .queue_name(format!("{prefix}-dlq"));
    if let Some(r) = dlq_props
        .get("MessageRetentionPeriod")
        .and_then(|v| template.resolve(v))
    {
        dlq = dlq.attributes(QueueAttributeName::MessageRetentionPeriod, r);
    }
    let dlq_url = dlq
        .send()
        .await
        .map_err(|e| aws(aws_sdk_sqs::error::DisplayErrorContext(e)))?
        .queue_url
        .unwrap_or_default();
    let dlq_arn = clients
        .sqs
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| aws(aws_sdk_sqs::error::DisplayErrorContext(e)))?
        .attributes
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .ok_or_else(|| BootstrapError::Aws("the dead-letter queue has no ARN".into()))?;
    let q = template.properties("WorkQueue")?;
    let mut work = clients
        .sqs
        .create_queue()
        .queue_name(format!("{prefix}-work"));
    for (prop, attr) in [
        ("VisibilityTimeout", QueueAttributeName::VisibilityTimeout),
        (
            "MessageRetentionPeriod",
            QueueAttributeName::MessageRetentionPeriod,
        ),
    ] {
        if let Some(v) = q.get(prop).and_then(|v| template.resolve(v)) {
            work = work.attributes(attr, v);
        }
    }
    let max_receives = q
        .get("RedrivePolicy")
        .and_then(|r| r.get("maxReceiveCount"))
        .and_then(|v| template.resolve(v))
        .ok_or_else(|| tpl("WorkQueue needs RedrivePolicy.maxReceiveCount"))?;
    let redrive =
        serde_json::json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receives});
    work = work.attributes(QueueAttributeName::RedrivePolicy, redrive.to_string());
    let queue_url = work
        .send()
        .await
        .map_err(|e| aws(aws_sdk_sqs::error::DisplayErrorContext(e)))?
        .queue_url
        .unwrap_or_default();

    // The bucket.
    template.properties("Bucket")?;
    let bucket = format!("{prefix}-documents");
    match clients.s3.create_bucket().bucket(&bucket).send().await {
        Ok(_) => {}
        Err(e)
            if e.as_service_error().is_some_and(|s| {
                s.is_bucket_already_owned_by_you() || s.is_bucket_already_exists()
            }) => {}
        Err(e) => return Err(aws(aws_sdk_s3::error::DisplayErrorContext(e))),
    }
    Ok(Names {
        table: names_table,
        queue_url,
        dlq_url: Some(dlq_url),
        bucket,
        render_queue_url: None,
    })
}

impl Names {
    /// `export NAME=value` lines for a shell.
    pub fn exports(&self) -> String {
        format!(
            "export SARVCRAWL_TABLE={}\nexport SARVCRAWL_QUEUE_URL={}\nexport SARVCRAWL_DLQ_URL={}\nexport SARVCRAWL_BUCKET={}\n",
            self.table,
            self.queue_url,
            self.dlq_url.as_deref().unwrap_or_default(),
            self.bucket
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_project_template() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../template.yaml"))
                .unwrap();
        let t = Template::parse(&text).unwrap();
        let q = t.properties("WorkQueue").unwrap();
        let vis: u64 = t
            .resolve(q.get("VisibilityTimeout").unwrap())
            .unwrap()
            .parse()
            .unwrap();
        let worker: u64 = t.params["WorkerTimeoutSeconds"].parse().unwrap();
        assert!(
            vis >= 6 * worker,
            "visibility {vis} vs worker timeout {worker}"
        );
        // A page's lease item outlives every copy of its task (see `JobStore::start_task_node`).
        for queue in ["WorkQueue", "RenderQueue"] {
            let q = t.properties(queue).unwrap();
            let kept: i64 = t
                .resolve(q.get("MessageRetentionPeriod").unwrap())
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                kept <= crate::dynamo::LEASE_KEPT_SECS,
                "{queue} keeps a message {kept} s, lease items are kept {} s",
                crate::dynamo::LEASE_KEPT_SECS
            );
        }
        let table = t.properties("Table").unwrap();
        assert_eq!(key_schema(table).unwrap().len(), 2);
        assert_eq!(str_at(table, "BillingMode").unwrap(), "PAY_PER_REQUEST");
    }
}
