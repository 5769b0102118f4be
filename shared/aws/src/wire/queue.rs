//! The SQS operations the work queue sends through the [`Wire`] (SQS's JSON protocol): each
//! takes the SDK's fluent builder and answers with the SDK's output or error.

use super::json::{list, refuse};
use super::ops::{exchange, generic, SendBy};
use super::{Json, Wire};
use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{BuildError, SdkError};
use aws_sdk_sqs::operation::change_message_visibility::builders::ChangeMessageVisibilityFluentBuilder;
use aws_sdk_sqs::operation::change_message_visibility::{
    ChangeMessageVisibilityError, ChangeMessageVisibilityOutput,
};
use aws_sdk_sqs::operation::delete_message_batch::builders::DeleteMessageBatchFluentBuilder;
use aws_sdk_sqs::operation::delete_message_batch::{
    DeleteMessageBatchError, DeleteMessageBatchOutput,
};
use aws_sdk_sqs::operation::receive_message::builders::ReceiveMessageFluentBuilder;
use aws_sdk_sqs::operation::receive_message::{ReceiveMessageError, ReceiveMessageOutput};
use aws_sdk_sqs::operation::send_message_batch::builders::SendMessageBatchFluentBuilder;
use aws_sdk_sqs::operation::send_message_batch::{SendMessageBatchError, SendMessageBatchOutput};
use aws_sdk_sqs::types::{
    BatchResultErrorEntry, DeleteMessageBatchResultEntry, Message, MessageSystemAttributeName,
    SendMessageBatchResultEntry,
};
use serde::Deserialize;
use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

fn sqs(target: &str) -> (Json, &str, Duration) {
    (Json::Sqs, target, Duration::ZERO)
}

/// A batch entry that failed.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Failed {
    id: String,
    #[serde(default)]
    sender_fault: bool,
    code: String,
    message: Option<String>,
}

fn failed(f: Vec<Failed>) -> Result<Vec<BatchResultErrorEntry>, BuildError> {
    f.into_iter()
        .map(|f| {
            BatchResultErrorEntry::builder()
                .id(f.id)
                .sender_fault(f.sender_fault)
                .code(f.code)
                .set_message(f.message)
                .build()
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Sent {
    #[serde(default)]
    successful: Vec<SentEntry>,
    #[serde(default)]
    failed: Vec<Failed>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct SentEntry {
    id: String,
    message_id: String,
    #[serde(rename = "MD5OfMessageBody")]
    md5_of_message_body: String,
}

impl SendBy for SendMessageBatchFluentBuilder {
    type Output = SendMessageBatchOutput;
    type Error = SendMessageBatchError;
    fn send_by(
        self,
        wire: &Wire,
    ) -> impl Future<
        Output = Result<SendMessageBatchOutput, SdkError<SendMessageBatchError, HttpResponse>>,
    > + Send {
        let i = self.as_input().clone();
        let wire = wire.clone();
        async move {
            exchange(
                &wire,
                sqs("AmazonSQS.SendMessageBatch"),
                |b| {
                    let entries = i.get_entries().as_deref().unwrap_or_default();
                    let mut failed = None;
                    let mut o = b.object();
                    o.str("QueueUrl", i.get_queue_url().as_deref())
                        .with("Entries", |b| {
                            failed = list(b, entries, |b, e| {
                                refuse("MessageAttributes", e.message_attributes())?;
                                refuse("MessageSystemAttributes", e.message_system_attributes())?;
                                let mut o = b.object();
                                o.str("Id", Some(e.id()))
                                    .str("MessageBody", Some(e.message_body()))
                                    .int("DelaySeconds", e.delay_seconds())
                                    .str("MessageDeduplicationId", e.message_deduplication_id())
                                    .str("MessageGroupId", e.message_group_id());
                                o.end();
                                Ok(())
                            })
                            .err();
                        });
                    o.end();
                    failed.map_or(Ok(()), Err)
                },
                |a: Sent| {
                    let successful = a
                        .successful
                        .into_iter()
                        .map(|s| {
                            SendMessageBatchResultEntry::builder()
                                .id(s.id)
                                .message_id(s.message_id)
                                .md5_of_message_body(s.md5_of_message_body)
                                .build()
                        })
                        .collect::<Result<_, _>>()?;
                    SendMessageBatchOutput::builder()
                        .set_successful(Some(successful))
                        .set_failed(Some(failed(a.failed)?))
                        .build()
                },
                generic(SendMessageBatchError::generic),
            )
            .await
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Received {
    #[serde(default)]
    messages: Vec<Received1>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Received1 {
    message_id: Option<String>,
    receipt_handle: Option<String>,
    #[serde(rename = "MD5OfBody")]
    md5_of_body: Option<String>,
    body: Option<String>,
    attributes: Option<HashMap<String, String>>,
}

impl SendBy for ReceiveMessageFluentBuilder {
    type Output = ReceiveMessageOutput;
    type Error = ReceiveMessageError;
    fn send_by(
        self,
        wire: &Wire,
    ) -> impl Future<
        Output = Result<ReceiveMessageOutput, SdkError<ReceiveMessageError, HttpResponse>>,
    > + Send {
        let i = self.as_input().clone();
        let wire = wire.clone();
        async move {
            // A long poll takes its wait on top of a call's usual time.
            let wait = Duration::from_secs(i.get_wait_time_seconds().unwrap_or(0).max(0) as u64);
            exchange(
                &wire,
                (Json::Sqs, "AmazonSQS.ReceiveMessage", wait),
                |b| {
                    #[allow(deprecated)]
                    let legacy = i.get_attribute_names().as_ref();
                    refuse("AttributeNames", legacy)?;
                    let names: Vec<&str> = i
                        .get_message_system_attribute_names()
                        .iter()
                        .flatten()
                        .map(|n| n.as_str())
                        .collect();
                    let mut o = b.object();
                    o.str("QueueUrl", i.get_queue_url().as_deref())
                        .strings("MessageSystemAttributeNames", &names)
                        .strings(
                            "MessageAttributeNames",
                            i.get_message_attribute_names()
                                .as_deref()
                                .unwrap_or_default(),
                        )
                        .int("MaxNumberOfMessages", *i.get_max_number_of_messages())
                        .int("VisibilityTimeout", *i.get_visibility_timeout())
                        .int("WaitTimeSeconds", *i.get_wait_time_seconds())
                        .str(
                            "ReceiveRequestAttemptId",
                            i.get_receive_request_attempt_id().as_deref(),
                        );
                    o.end();
                    Ok(())
                },
                |a: Received| {
                    let messages = a
                        .messages
                        .into_iter()
                        .map(|m| {
                            Message::builder()
                                .set_message_id(m.message_id)
                                .set_receipt_handle(m.receipt_handle)
                                .set_md5_of_body(m.md5_of_body)
                                .set_body(m.body)
                                .set_attributes(m.attributes.map(|a| {
                                    a.into_iter()
                                        .map(|(k, v)| {
                                            (MessageSystemAttributeName::from(k.as_str()), v)
                                        })
                                        .collect()
                                }))
                                .build()
                        })
                        .collect();
                    Ok(ReceiveMessageOutput::builder()
                        .set_messages(Some(messages))
                        .build())
                },
                generic(ReceiveMessageError::generic),
            )
            .await
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Deleted {
    #[serde(default)]
    successful: Vec<DeletedEntry>,
    #[serde(default)]
    failed: Vec<Failed>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DeletedEntry {
    id: String,
}

impl SendBy for DeleteMessageBatchFluentBuilder {
    type Output = DeleteMessageBatchOutput;
    type Error = DeleteMessageBatchError;
    fn send_by(
        self,
        wire: &Wire,
    ) -> impl Future<
        Output = Result<DeleteMessageBatchOutput, SdkError<DeleteMessageBatchError, HttpResponse>>,
    > + Send {
        let i = self.as_input().clone();
        let wire = wire.clone();
        async move {
            exchange(
                &wire,
                sqs("AmazonSQS.DeleteMessageBatch"),
                |b| {
                    let entries = i.get_entries().as_deref().unwrap_or_default();
                    let mut o = b.object();
                    o.str("QueueUrl", i.get_queue_url().as_deref())
                        .with("Entries", |b| {
                            // Writing these entries cannot fail.
                            let _ = list(b, entries, |b, e| {
                                b.object()
                                    .str("Id", Some(e.id()))
                                    .str("ReceiptHandle", Some(e.receipt_handle()))
                                    .end();
                                Ok(())
                            });
                        });
                    o.end();
                    Ok(())
                },
                |a: Deleted| {
                    let successful = a
                        .successful
                        .into_iter()
                        .map(|s| DeleteMessageBatchResultEntry::builder().id(s.id).build())
                        .collect::<Result<_, _>>()?;
                    DeleteMessageBatchOutput::builder()
                        .set_successful(Some(successful))
                        .set_failed(Some(failed(a.failed)?))
                        .build()
                },
                generic(DeleteMessageBatchError::generic),
            )
            .await
        }
    }
}

impl SendBy for ChangeMessageVisibilityFluentBuilder {
    type Output = ChangeMessageVisibilityOutput;
    type Error = ChangeMessageVisibilityError;
    fn send_by(
        self,
        wire: &Wire,
    ) -> impl Future<
        Output = Result<
            ChangeMessageVisibilityOutput,
            SdkError<ChangeMessageVisibilityError, HttpResponse>,
        >,
    > + Send {
        let i = self.as_input().clone();
        let wire = wire.clone();
        async move {
            exchange(
                &wire,
                sqs("AmazonSQS.ChangeMessageVisibility"),
                |b| {
                    let mut o = b.object();
                    o.str("QueueUrl", i.get_queue_url().as_deref())
                        .str("ReceiptHandle", i.get_receipt_handle().as_deref())
                        .int("VisibilityTimeout", *i.get_visibility_timeout());
                    o.end();
                    Ok(())
                },
                |_: serde::de::IgnoredAny| Ok(ChangeMessageVisibilityOutput::builder().build()),
                generic(ChangeMessageVisibilityError::generic),
            )
            .await
        }
    }
}
