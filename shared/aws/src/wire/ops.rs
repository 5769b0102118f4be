//! The operations the stores send through the [`Wire`]: each takes the SDK's fluent builder as
//! the stores make it and answers with the SDK's output or error.

use super::json::{self, refuse, Body, Unsupported};
use super::read::{self, BatchGot, BatchWritten, GotItem, Queried, Written};
use super::{response, Failure, Json, Wire};
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::batch_get_item::builders::BatchGetItemFluentBuilder;
use aws_sdk_dynamodb::operation::batch_get_item::{BatchGetItemError, BatchGetItemOutput};
use aws_sdk_dynamodb::operation::batch_write_item::builders::BatchWriteItemFluentBuilder;
use aws_sdk_dynamodb::operation::batch_write_item::{BatchWriteItemError, BatchWriteItemOutput};
use aws_sdk_dynamodb::operation::delete_item::builders::DeleteItemFluentBuilder;
use aws_sdk_dynamodb::operation::delete_item::{DeleteItemError, DeleteItemOutput};
use aws_sdk_dynamodb::operation::get_item::builders::GetItemFluentBuilder;
use aws_sdk_dynamodb::operation::get_item::{GetItemError, GetItemOutput};
use aws_sdk_dynamodb::operation::put_item::builders::PutItemFluentBuilder;
use aws_sdk_dynamodb::operation::put_item::{PutItemError, PutItemOutput};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::query::{QueryError, QueryOutput};
use aws_sdk_dynamodb::operation::transact_write_items::builders::TransactWriteItemsFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::{
    TransactWriteItemsError, TransactWriteItemsOutput,
};
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::error::TransactionCanceledException;
use aws_sdk_dynamodb::types::CancellationReason;
use bytes::Bytes;
use std::future::Future;
use std::time::Duration;

/// Sends an SDK request through a [`Wire`] instead of the SDK.
pub trait SendBy {
    type Output;
    type Error;
    fn send_by(
        self,
        wire: &Wire,
    ) -> impl Future<Output = Result<Self::Output, SdkError<Self::Error, HttpResponse>>> + Send;
}

/// Calls `target` with the body `write` writes, and reads the answer with `output`; `error`
/// makes the operation's error of a refusal.
pub(super) async fn exchange<O, E, A>(
    wire: &Wire,
    (service, target, longer): (Json, &str, Duration),
    write: impl FnOnce(&mut Body) -> Result<(), Unsupported>,
    output: impl FnOnce(A) -> Result<O, aws_sdk_dynamodb::error::BuildError>,
    error: impl FnOnce(ErrorMetadata, Option<Vec<CancellationReason>>) -> E,
) -> Result<O, SdkError<E, HttpResponse>>
where
    A: serde::de::DeserializeOwned,
{
    let mut body = Body::new();
    write(&mut body).map_err(SdkError::construction_failure)?;
    let answer: Bytes = wire
        .call(service, target, body.into_bytes(), longer)
        .await
        .map_err(|f: Failure| f.into_sdk(error))?;
    let unreadable = |e: Box<dyn std::error::Error + Send + Sync>| {
        SdkError::response_error(e, response(200, answer.clone()))
    };
    let read: A = serde_json::from_slice(&answer).map_err(|e| unreadable(e.into()))?;
    output(read).map_err(|e| unreadable(e.into()))
}

/// A DynamoDB operation's target.
fn dynamodb(target: &str) -> (Json, &str, Duration) {
    (Json::DynamoDb, target, Duration::ZERO)
}

pub(super) fn generic<E>(
    make: fn(ErrorMetadata) -> E,
) -> impl FnOnce(ErrorMetadata, Option<Vec<CancellationReason>>) -> E {
    move |meta, _| make(meta)
}

impl SendBy for GetItemFluentBuilder {
    type Output = GetItemOutput;
    type Error = GetItemError;
    fn send_by(
        self,
        wire: &Wire,
    ) -> impl Future<Output = Result<GetItemOutput, SdkError<GetItemError, HttpResponse>>> + Send
    {
        let i = self.as_input().clone();
        let wire = wire.clone();
        async move {
            exchange(
                &wire,
                dynamodb("DynamoDB_20120810.GetItem"),
                |b| {
                    refuse("AttributesToGet", i.get_attributes_to_get().as_ref())?;
                    let mut o = b.object();
                    o.str("TableName", i.get_table_name().as_deref())
                        .item("Key", i.get_key().as_ref())
                        .bool("ConsistentRead", *i.get_consistent_read())
                        .str(
                            "ProjectionExpression",
                            i.get_projection_expression().as_deref(),
                        )
                        .expression(i.get_expression_attribute_names().as_ref(), None);
                    o.end();
                    Ok(())
                },
                |a: GotItem| {
                    Ok(GetItemOutput::builder()
                        .set_item(a.item.map(|i| i.0))
                        .build())
                },
                generic(GetItemError::generic),
            )
            .await
        }
    }
}

impl SendBy for PutItemFluentBuilder {
    type Output = PutItemOutput;
    type Error = PutItemError;
    fn send_by(
        self,
        wire: &Wire,
    ) -> impl Future<Output = Result<PutItemOutput, SdkError<PutItemError, HttpResponse>>> + Send
    {
        let i = self.as_input().clone();
        let wire = wire.clone();
        async move {
            exchange(
                &wire,
                dynamodb("DynamoDB_20120810.PutItem"),
                |b| {
                    refuse("Expected", i.get_expected().as_ref())?;
                    refuse("ConditionalOperator", i.get_conditional_operator().as_ref())?;
                    let mut o = b.object();
                    o.str("TableName", i.get_table_name().as_deref())
                        .item("Item", i.get_item().as_ref())
                        .str(
                            "ConditionExpression",
                            i.get_condition_expression().as_deref(),
                        )
                        .expression(
                            i.get_expression_attribute_names().as_ref(),
                            i.get_expression_attribute_values().as_ref(),
                        )
                        .returns(
                            i.get_return_values().as_ref(),
                            i.get_return_values_on_condition_check_failure().as_ref(),
                        );
                    o.end();
                    Ok(())
                },
                |a: Written| {
                    Ok(PutItemOutput::builder()
                        .set_attributes(a.attributes.map(|i| i.0))
                        .build())
                },
                generic(PutItemError::generic),
            )
            .await
        }
    }
}

impl SendBy for UpdateItemFluentBuilder {
    type Output = UpdateItemOutput;
    type Error = UpdateItemError;
    fn send_by(
        self,
        wire: &Wire,
    ) -> impl Future<Output = Result<UpdateItemOutput, SdkError<UpdateItemError, HttpResponse>>> + Send
    {
        let i = self.as_input().clone();
        let wire = wire.clone();
        async move {
            exchange(
                &wire,
                dynamodb("DynamoDB_20120810.UpdateItem"),
                |b| {
                    refuse("AttributeUpdates", i.get_attribute_updates().as_ref())?;
                    refuse("Expected", i.get_expected().as_ref())?;
                    refuse("ConditionalOperator", i.get_conditional_operator().as_ref())?;
                    let mut o = b.object();
                    o.str("TableName", i.get_table_name().as_deref())
                        .item("Key", i.get_key().as_ref())
                        .str("UpdateExpression", i.get_update_expression().as_deref())
                        .str(
                            "ConditionExpression",
                            i.get_condition_expression().as_deref(),
                        )
                        .expression(
                            i.get_expression_attribute_names().as_ref(),
                            i.get_expression_attribute_values().as_ref(),
                        )
                        .returns(
                            i.get_return_values().as_ref(),
                            i.get_return_values_on_condition_check_failure().as_ref(),
                        );
                    o.end();
                    Ok(())
                },
                |a: Written| {
                    Ok(UpdateItemOutput::builder()
                        .set_attributes(a.attributes.map(|i| i.0))
                        .build())
                },
                generic(UpdateItemError::generic),
            )
            .await
        }
    }
}

impl SendBy for DeleteItemFluentBuilder {
    type Output = DeleteItemOutput;
    type Error = DeleteItemError;
    fn send_by(
        self,
        wire: &Wire,
    ) -> impl Future<Output = Result<DeleteItemOutput, SdkError<DeleteItemError, HttpResponse>>> + Send
    {
        let i = self.as_input().clone();
        let wire = wire.clone();
        async move {
            exchange(
                &wire,
                dynamodb("DynamoDB_20120810.DeleteItem"),
                |b| {
                    refuse("Expected", i.get_expected().as_ref())?;
                    refuse("ConditionalOperator", i.get_conditional_operator().as_ref())?;
                    let mut o = b.object();
                    o.str("TableName", i.get_table_name().as_deref())
                        .item("Key", i.get_key().as_ref())
                        .str(
                            "ConditionExpression",
                            i.get_condition_expression().as_deref(),
                        )
                        .expression(
                            i.get_expression_attribute_names().as_ref(),
                            i.get_expression_attribute_values().as_ref(),
                        )
                        .returns(
                            i.get_return_values().as_ref(),
                            i.get_return_values_on_condition_check_failure().as_ref(),
                        );
                    o.end();
                    Ok(())
                },
                |a: Written| {
                    Ok(DeleteItemOutput::builder()
                        .set_attributes(a.attributes.map(|i| i.0))
                        .build())
                },
                generic(DeleteItemError::generic),
            )
            .await
        }
    }
}

impl SendBy for QueryFluentBuilder {
    type Output = QueryOutput;
    type Error = QueryError;
    fn send_by(
        self,
        wire: &Wire,
    ) -> impl Future<Output = Result<QueryOutput, SdkError<QueryError, HttpResponse>>> + Send {
        let i = self.as_input().clone();
        let wire = wire.clone();
        async move {
            exchange(
                &wire,
                dynamodb("DynamoDB_20120810.Query"),
                |b| {
                    refuse("AttributesToGet", i.get_attributes_to_get().as_ref())?;
                    refuse("KeyConditions", i.get_key_conditions().as_ref())?;
                    refuse("QueryFilter", i.get_query_filter().as_ref())?;
                    refuse("ConditionalOperator", i.get_conditional_operator().as_ref())?;
                    let mut o = b.object();
                    o.str("TableName", i.get_table_name().as_deref())
                        .str("IndexName", i.get_index_name().as_deref())
                        .str("Select", i.get_select().as_ref().map(|v| v.as_str()))
                        .int("Limit", *i.get_limit())
                        .bool("ConsistentRead", *i.get_consistent_read())
                        .bool("ScanIndexForward", *i.get_scan_index_forward())
                        .item("ExclusiveStartKey", i.get_exclusive_start_key().as_ref())
                        .str(
                            "ProjectionExpression",
                            i.get_projection_expression().as_deref(),
                        )
                        .str("FilterExpression", i.get_filter_expression().as_deref())
                        .str(
                            "KeyConditionExpression",
                            i.get_key_condition_expression().as_deref(),
                        )
                        .expression(
                            i.get_expression_attribute_names().as_ref(),
                            i.get_expression_attribute_values().as_ref(),
                        );
                    o.end();
                    Ok(())
                },
                |a: Queried| {
                    Ok(QueryOutput::builder()
                        .set_items(a.items.map(|i| i.0))
                        .count(a.count)
                        .scanned_count(a.scanned_count)
                        .set_last_evaluated_key(a.last_evaluated_key.map(|i| i.0))
                        .build())
                },
                generic(QueryError::generic),
            )
            .await
        }
    }
}

impl SendBy for TransactWriteItemsFluentBuilder {
    type Output = TransactWriteItemsOutput;
    type Error = TransactWriteItemsError;
    fn send_by(
        self,
        wire: &Wire,
    ) -> impl Future<
        Output = Result<TransactWriteItemsOutput, SdkError<TransactWriteItemsError, HttpResponse>>,
    > + Send {
        let i = self.as_input().clone();
        let wire = wire.clone();
        async move {
            exchange(
                &wire,
                dynamodb("DynamoDB_20120810.TransactWriteItems"),
                |b| {
                    let items = i.get_transact_items().as_deref().unwrap_or_default();
                    let mut failed = None;
                    let mut o = b.object();
                    o.with("TransactItems", |b| {
                        failed = json::list(b, items, json::transact_item).err();
                    })
                    .str(
                        "ClientRequestToken",
                        i.get_client_request_token().as_deref(),
                    );
                    o.end();
                    failed.map_or(Ok(()), Err)
                },
                |_: serde::de::IgnoredAny| Ok(TransactWriteItemsOutput::builder().build()),
                |meta, reasons| match reasons {
                    Some(reasons) if meta.code() == Some("TransactionCanceledException") => {
                        let mut e = TransactionCanceledException::builder()
                            .set_cancellation_reasons(Some(reasons));
                        if let Some(m) = meta.message() {
                            e = e.message(m);
                        }
                        TransactWriteItemsError::TransactionCanceledException(e.meta(meta).build())
                    }
                    _ => TransactWriteItemsError::generic(meta),
                },
            )
            .await
        }
    }
}

impl SendBy for BatchWriteItemFluentBuilder {
    type Output = BatchWriteItemOutput;
    type Error = BatchWriteItemError;
    fn send_by(
        self,
        wire: &Wire,
    ) -> impl Future<
        Output = Result<BatchWriteItemOutput, SdkError<BatchWriteItemError, HttpResponse>>,
    > + Send {
        let i = self.as_input().clone();
        let wire = wire.clone();
        async move {
            exchange(
                &wire,
                dynamodb("DynamoDB_20120810.BatchWriteItem"),
                |b| {
                    let mut failed = None;
                    let mut o = b.object();
                    o.with("RequestItems", |b| {
                        let mut tables = b.object();
                        for (table, writes) in i.get_request_items().iter().flatten() {
                            tables.with(table, |b| {
                                if let Err(e) = json::list(b, writes, json::write_request) {
                                    failed = Some(e);
                                }
                            });
                        }
                        tables.end();
                    });
                    o.end();
                    failed.map_or(Ok(()), Err)
                },
                |a: BatchWritten| {
                    let unprocessed = match a.unprocessed_items {
                        Some(tables) => Some(
                            tables
                                .into_iter()
                                .map(|(t, ws)| {
                                    let ws = ws
                                        .into_iter()
                                        .map(read::Request::into_sdk)
                                        .collect::<Result<Vec<_>, _>>()?;
                                    Ok((t, ws))
                                })
                                .collect::<Result<_, aws_sdk_dynamodb::error::BuildError>>()?,
                        ),
                        None => None,
                    };
                    Ok(BatchWriteItemOutput::builder()
                        .set_unprocessed_items(unprocessed)
                        .build())
                },
                generic(BatchWriteItemError::generic),
            )
            .await
        }
    }
}

impl SendBy for BatchGetItemFluentBuilder {
    type Output = BatchGetItemOutput;
    type Error = BatchGetItemError;
    fn send_by(
        self,
        wire: &Wire,
    ) -> impl Future<Output = Result<BatchGetItemOutput, SdkError<BatchGetItemError, HttpResponse>>> + Send
    {
        let i = self.as_input().clone();
        let wire = wire.clone();
        async move {
            exchange(
                &wire,
                dynamodb("DynamoDB_20120810.BatchGetItem"),
                |b| {
                    let mut failed = None;
                    let mut o = b.object();
                    o.with("RequestItems", |b| {
                        let mut tables = b.object();
                        for (table, keys) in i.get_request_items().iter().flatten() {
                            tables.with(table, |b| {
                                if let Err(e) = json::keys_and_attributes(b, keys) {
                                    failed = Some(e);
                                }
                            });
                        }
                        tables.end();
                    });
                    o.end();
                    failed.map_or(Ok(()), Err)
                },
                |a: BatchGot| {
                    let unprocessed = match a.unprocessed_keys {
                        Some(tables) => Some(
                            tables
                                .into_iter()
                                .map(|(t, k)| Ok((t, k.into_sdk()?)))
                                .collect::<Result<_, aws_sdk_dynamodb::error::BuildError>>()?,
                        ),
                        None => None,
                    };
                    Ok(BatchGetItemOutput::builder()
                        .set_responses(
                            a.responses
                                .map(|r| r.into_iter().map(|(t, items)| (t, items.0)).collect()),
                        )
                        .set_unprocessed_keys(unprocessed)
                        .build())
                },
                generic(BatchGetItemError::generic),
            )
            .await
        }
    }
}

/// A query's items, page after page, as the SDK's paginator gives them.
pub(crate) struct Pages {
    wire: Wire,
    query: Option<QueryFluentBuilder>,
    page: std::vec::IntoIter<read::Item>,
}

/// Reads a query's items through a [`Wire`], following its pages.
pub(crate) trait PagesBy {
    fn pages_by(self, wire: &Wire) -> Pages;
}

impl PagesBy for QueryFluentBuilder {
    fn pages_by(self, wire: &Wire) -> Pages {
        Pages {
            wire: wire.clone(),
            query: Some(self),
            page: Vec::new().into_iter(),
        }
    }
}

impl Pages {
    /// The next item; a query's next page is read when its last ran out.
    pub async fn next(&mut self) -> Option<Result<read::Item, SdkError<QueryError, HttpResponse>>> {
        loop {
            if let Some(item) = self.page.next() {
                return Some(Ok(item));
            }
            let query = self.query.take()?;
            match query.clone().send_by(&self.wire).await {
                Err(e) => return Some(Err(e)),
                Ok(out) => {
                    self.page = out.items.unwrap_or_default().into_iter();
                    // A page that names the key it started from as the next would be read
                    // again and again: the query ends there, as the SDK's paginator ends it.
                    if let Some(key) = out.last_evaluated_key.filter(|k| {
                        !k.is_empty() && query.get_exclusive_start_key().as_ref() != Some(k)
                    }) {
                        self.query = Some(query.set_exclusive_start_key(Some(key)));
                    }
                }
            }
        }
    }
}
