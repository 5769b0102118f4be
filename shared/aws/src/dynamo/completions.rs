//! Completing nodes: each node's outcome and the job's counters in one transaction, for all the
//! pages of a job this process completes at once (see `group`), then each document's place in
//! the results.

use super::items::{
    activity, build, cancellation, count_key, get_item, get_n, get_s, key, n, node_sk, s, Item,
};
use super::DynamoStore;
use crate::conflicts;
use crate::errors::sdk;
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use sarvcrawl_core::ports::{Completion, NodeStatus, PageOutcome, StoreError, StoreResult};

/// Most nodes one transaction completes (with the counters, DynamoDB's 100 actions).
const MAX_NODES: usize = 99;

/// One page to complete.
pub(crate) struct Done {
    pub url: String,
    pub outcome: PageOutcome,
}

impl DynamoStore {
    /// [`JobStore::complete_node`](sarvcrawl_core::ports::JobStore::complete_node), written
    /// together with the other completions of the job under way in this process.
    pub(crate) async fn complete(
        &self,
        pk: &str,
        url: &str,
        outcome: &PageOutcome,
    ) -> StoreResult<Completion> {
        if outcome.status.is_pending() {
            let counts = self.counts(pk).await?;
            return Ok(completion(counts.as_ref(), false));
        }
        let done = Done {
            url: url.to_string(),
            outcome: outcome.clone(),
        };
        self.completions
            .write(pk, done, |batch| self.complete_all(pk, batch))
            .await
    }

    /// Completes `batch`: the nodes and the counters in as few transactions as they fit (a
    /// node done before is left out and reported not applied), then the results.
    async fn complete_all(&self, pk: &str, batch: Vec<Done>) -> Vec<StoreResult<Completion>> {
        let n_items = batch.len();
        let mut applied = vec![false; n_items];
        let mut failure: Option<String> = None;
        // Each node's result item is named when it is completed, so a later delivery for a
        // node done before can write it again if its first writer stopped before it did.
        let names: Vec<String> = batch
            .iter()
            .map(|_| ulid::Ulid::new().to_string())
            .collect();
        let mut remaining: Vec<usize> = (0..n_items).collect();
        while !remaining.is_empty() {
            let chunk: Vec<usize> = remaining.iter().copied().take(MAX_NODES).collect();
            let items = match self.completion_items(pk, &batch, &names, &chunk) {
                Ok(items) => items,
                Err(e) => {
                    failure = Some(e.to_string());
                    break;
                }
            };
            match conflicts::transact(&self.client, items).await {
                Ok(()) => {
                    for &i in &chunk {
                        applied[i] = true;
                    }
                    remaining.retain(|i| !chunk.contains(i));
                }
                Err(e) => match cancellation(&e) {
                    // The job's counters are gone: nothing to complete.
                    Some(c) if c.first() == Some(&true) => break,
                    // Nodes done before drop out; the others are tried again.
                    Some(c) if c.iter().any(|f| *f) => {
                        let before: Vec<usize> = chunk
                            .iter()
                            .zip(c.iter().skip(1))
                            .filter(|(_, f)| **f)
                            .map(|(i, _)| *i)
                            .collect();
                        remaining.retain(|i| !before.contains(i));
                    }
                    _ => {
                        failure = Some(sdk(e).to_string());
                        break;
                    }
                },
            }
        }
        let results = self.index_results(pk, &batch, &names, &applied).await;
        let counts = match (failure, results) {
            (Some(f), _) => Err(StoreError::transient(f)),
            (None, Err(e)) => Err(e),
            (None, Ok(())) => self.counts(pk).await,
        };
        match counts {
            Ok(counts) => applied
                .iter()
                .map(|a| Ok(completion(counts.as_ref(), *a)))
                .collect(),
            Err(e) => {
                let message = e.to_string();
                (0..n_items)
                    .map(|_| Err(StoreError::transient(message.clone())))
                    .collect()
            }
        }
    }

    /// The transaction completing the nodes `chunk` of `batch`: the counters first, then one
    /// update per node.
    fn completion_items(
        &self,
        pk: &str,
        batch: &[Done],
        names: &[String],
        chunk: &[usize],
    ) -> StoreResult<Vec<TransactWriteItem>> {
        let (mut completed, mut failed, mut results, mut tokens) = (0, 0, 0, 0);
        for &i in chunk {
            let o = &batch[i].outcome;
            tokens += o.tokens;
            match o.status {
                NodeStatus::Completed => completed += 1,
                NodeStatus::Failed => failed += 1,
                _ => {}
            }
            results += u64::from(o.document_key.is_some());
        }
        let counters = build(
            Update::builder()
                .table_name(&self.table)
                .set_key(Some(count_key(pk)))
                .update_expression(
                    "ADD completed :c, failed :f, pending :minus, in_flight :minus, results :res, \
                     tokens :tok SET act = :act, repairs = :zero",
                )
                .condition_expression("attribute_exists(PK)")
                .expression_attribute_values(":c", n(completed))
                .expression_attribute_values(":f", n(failed))
                .expression_attribute_values(":minus", n(-(chunk.len() as i64)))
                .expression_attribute_values(":res", n(results))
                .expression_attribute_values(":tok", n(tokens))
                .expression_attribute_values(":zero", n(0))
                .expression_attribute_values(":act", s(activity(self.clock.now())))
                .build(),
        )?;
        let mut items = vec![TransactWriteItem::builder().update(counters).build()];
        for &i in chunk {
            let Done { url, outcome } = &batch[i];
            let mut set = "SET #s = :st, done = :done".to_string();
            let mut node = Update::builder()
                .table_name(&self.table)
                .set_key(Some(key(pk.to_string(), node_sk(url))))
                .condition_expression("#s IN (:q, :r)")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":st", s(outcome.status.as_str()))
                .expression_attribute_values(":q", s("queued"))
                .expression_attribute_values(":r", s("running"))
                .expression_attribute_values(":done", s(names[i].clone()));
            if let Some(code) = outcome.status_code {
                set.push_str(", status_code = :c");
                node = node.expression_attribute_values(":c", n(code));
            }
            if let Some(doc) = &outcome.document_key {
                set.push_str(", doc_key = :doc");
                node = node.expression_attribute_values(":doc", s(doc.clone()));
            }
            let node = build(node.update_expression(set).build())?;
            items.push(TransactWriteItem::builder().update(node).build());
        }
        Ok(items)
    }

    /// Writes the result items of the nodes completed now, and again those of nodes found
    /// done before (their first writer may have stopped before writing them).
    async fn index_results(
        &self,
        pk: &str,
        batch: &[Done],
        names: &[String],
        applied: &[bool],
    ) -> StoreResult<()> {
        let mut results = Vec::new();
        for (i, done) in batch.iter().enumerate() {
            if applied[i] {
                if let Some(doc) = &done.outcome.document_key {
                    results.push(result_item(pk, &names[i], doc));
                }
                continue;
            }
            let node = get_item(
                &self.client,
                &self.table,
                key(pk.into(), node_sk(&done.url)),
            )
            .await?;
            if let Some((name, doc)) = node
                .as_ref()
                .and_then(|i| Some((get_s(i, "done")?, get_s(i, "doc_key")?)))
            {
                results.push(result_item(pk, name, doc));
            }
        }
        self.batch_put(&results).await?;
        Ok(())
    }
}

/// The result item of a document, named `name`.
fn result_item(pk: &str, name: &str, doc: &str) -> Item {
    let mut item = key(pk.to_string(), format!("RES#{name}"));
    item.insert("doc_key".into(), s(doc));
    item
}

/// What a completion leaves: the job's pending nodes, and how many of them wait in its
/// frontier.
fn completion(counts: Option<&Item>, applied: bool) -> Completion {
    let count = |k: &str| counts.and_then(|c| get_n::<u64>(c, k)).unwrap_or(0);
    let pending = count("pending");
    Completion {
        applied,
        pending,
        waiting: pending.saturating_sub(count("in_flight")),
    }
}
