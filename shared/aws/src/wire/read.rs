//! DynamoDB's JSON answers read into the SDK's types: attribute values, items, and the
//! outputs and errors of the operations the wire sends.

use super::Failure;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, DeleteRequest, KeysAndAttributes, PutRequest, WriteRequest,
};
use bytes::Bytes;
use serde::de::{Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;

pub(crate) type Item = HashMap<String, AttributeValue>;

/// An attribute value as DynamoDB writes it (`{"S": "..."}`, `{"M": {...}}` ...).
pub(crate) struct Value(pub AttributeValue);

/// An item: a map of attribute values.
pub(crate) struct ItemOf(pub Item);

fn blob<E: serde::de::Error>(s: &str) -> Result<Blob, E> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map(Blob::new)
        .map_err(E::custom)
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an attribute value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
                let Some(tag) = map.next_key::<std::borrow::Cow<'de, str>>()? else {
                    return Err(A::Error::custom("an attribute value without its type"));
                };
                let v = match &*tag {
                    "S" => AttributeValue::S(map.next_value()?),
                    "N" => AttributeValue::N(map.next_value()?),
                    "BOOL" => AttributeValue::Bool(map.next_value()?),
                    "NULL" => AttributeValue::Null(map.next_value()?),
                    "B" => AttributeValue::B(blob(&map.next_value::<String>()?)?),
                    "M" => AttributeValue::M(map.next_value::<ItemOf>()?.0),
                    "L" => AttributeValue::L(
                        map.next_value::<Vec<Value>>()?
                            .into_iter()
                            .map(|v| v.0)
                            .collect(),
                    ),
                    "SS" => AttributeValue::Ss(map.next_value()?),
                    "NS" => AttributeValue::Ns(map.next_value()?),
                    "BS" => AttributeValue::Bs(
                        map.next_value::<Vec<String>>()?
                            .iter()
                            .map(|s| blob(s))
                            .collect::<Result<_, _>>()?,
                    ),
                    other => return Err(A::Error::custom(format!("attribute type {other}"))),
                };
                if map.next_key::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(A::Error::custom("an attribute value of two types"));
                }
                Ok(Value(v))
            }
        }
        d.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for ItemOf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ItemOf;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an item")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ItemOf, A::Error> {
                let mut item = HashMap::with_capacity(map.size_hint().unwrap_or(8));
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    item.insert(k, v.0);
                }
                Ok(ItemOf(item))
            }
        }
        d.deserialize_map(V)
    }
}

/// A list of items.
pub(crate) struct Items(pub Vec<Item>);

impl<'de> Deserialize<'de> for Items {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Items;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of items")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Items, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
                while let Some(i) = seq.next_element::<ItemOf>()? {
                    items.push(i.0);
                }
                Ok(Items(items))
            }
        }
        d.deserialize_seq(V)
    }
}

/// `GetItem`'s answer.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct GotItem {
    pub item: Option<ItemOf>,
}

/// `PutItem`'s, `UpdateItem`'s and `DeleteItem`'s answer.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Written {
    pub attributes: Option<ItemOf>,
}

/// `Query`'s answer.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Queried {
    pub items: Option<Items>,
    #[serde(default)]
    pub count: i32,
    #[serde(default)]
    pub scanned_count: i32,
    pub last_evaluated_key: Option<ItemOf>,
}

/// `BatchGetItem`'s answer.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct BatchGot {
    pub responses: Option<HashMap<String, Items>>,
    pub unprocessed_keys: Option<HashMap<String, Keys>>,
}

/// Keys left unread by `BatchGetItem`, as they were asked.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Keys {
    keys: Items,
    consistent_read: Option<bool>,
    projection_expression: Option<String>,
    expression_attribute_names: Option<HashMap<String, String>>,
}

impl Keys {
    pub fn into_sdk(self) -> Result<KeysAndAttributes, aws_sdk_dynamodb::error::BuildError> {
        KeysAndAttributes::builder()
            .set_keys(Some(self.keys.0))
            .set_consistent_read(self.consistent_read)
            .set_projection_expression(self.projection_expression)
            .set_expression_attribute_names(self.expression_attribute_names)
            .build()
    }
}

/// `BatchWriteItem`'s answer.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct BatchWritten {
    pub unprocessed_items: Option<HashMap<String, Vec<Request>>>,
}

/// A write left undone by `BatchWriteItem`.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Request {
    put_request: Option<KeyedItem>,
    delete_request: Option<KeyedItem>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct KeyedItem {
    item: Option<ItemOf>,
    key: Option<ItemOf>,
}

impl Request {
    pub fn into_sdk(self) -> Result<WriteRequest, aws_sdk_dynamodb::error::BuildError> {
        let mut w = WriteRequest::builder();
        if let Some(p) = self.put_request {
            w = w.put_request(
                PutRequest::builder()
                    .set_item(p.item.map(|i| i.0))
                    .build()?,
            );
        }
        if let Some(d) = self.delete_request {
            w = w.delete_request(
                DeleteRequest::builder()
                    .set_key(d.key.map(|i| i.0))
                    .build()?,
            );
        }
        Ok(w.build())
    }
}

/// An error's body: its type (`namespace#Code`), message and, for a cancelled transaction, the
/// reason of each of its items.
#[derive(Deserialize, Default)]
pub(crate) struct Refusal {
    #[serde(rename = "__type", default)]
    kind: String,
    #[serde(alias = "Message", default)]
    pub message: Option<String>,
    #[serde(rename = "CancellationReasons", default)]
    reasons: Option<Vec<Reason>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Reason {
    code: Option<String>,
    message: Option<String>,
    item: Option<ItemOf>,
}

/// A JSON error answer (DynamoDB's, SQS's) as a [`Failure`].
pub(crate) fn json_refusal(status: u16, body: Bytes) -> Failure {
    let mut refusal: Refusal = serde_json::from_slice(&body).unwrap_or_default();
    let code = match refusal.code() {
        "" => format!("HTTP {status}"),
        c => c.to_string(),
    };
    Failure::Refused {
        status,
        code,
        message: refusal.message.take(),
        reasons: refusal.reasons(),
        body,
    }
}

/// An S3 error answer (`<Error><Code>...</Code><Message>...</Message>...`) as a [`Failure`].
pub(crate) fn s3_refusal(status: u16, body: Bytes) -> Failure {
    let text = String::from_utf8_lossy(&body);
    let element = |name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find('<')? + start;
        Some(text[start..end].to_string())
    };
    let code = element("Code").unwrap_or_else(|| format!("HTTP {status}"));
    let message = element("Message");
    Failure::Refused {
        status,
        code,
        message,
        reasons: None,
        body,
    }
}

impl Refusal {
    /// The error's code: its type after the namespace.
    pub fn code(&self) -> &str {
        self.kind.rsplit('#').next().unwrap_or_default()
    }

    /// A cancelled transaction's reasons, one per item, in order.
    pub fn reasons(&mut self) -> Option<Vec<CancellationReason>> {
        self.reasons.take().map(|reasons| {
            reasons
                .into_iter()
                .map(|r| {
                    CancellationReason::builder()
                        .set_code(r.code)
                        .set_message(r.message)
                        .set_item(r.item.map(|i| i.0))
                        .build()
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value written by the writer reads back as itself; values of an unknown or no type,
    /// or of two types, are refused.
    #[test]
    fn values_read_back_and_malformed_ones_are_refused() {
        let text = r#"{"Item": {"s": {"S": "é\"\n"}, "n": {"N": "3"}, "m": {"M": {"l": {"L": [{"BOOL": true}, {"NULL": true}, {"B": "AP8H"}]}}},
                       "ss": {"SS": ["a"]}, "ns": {"NS": ["1", "2"]}, "bs": {"BS": ["aGk="]}}}"#;
        let item = serde_json::from_str::<GotItem>(text)
            .unwrap()
            .item
            .unwrap()
            .0;
        assert_eq!(item["s"], AttributeValue::S("é\"\n".into()));
        assert_eq!(item["n"], AttributeValue::N("3".into()));
        assert_eq!(
            item["m"],
            AttributeValue::M(HashMap::from([(
                "l".to_string(),
                AttributeValue::L(vec![
                    AttributeValue::Bool(true),
                    AttributeValue::Null(true),
                    AttributeValue::B(Blob::new(vec![0, 255, 7])),
                ])
            )]))
        );
        assert_eq!(item["ss"], AttributeValue::Ss(vec!["a".into()]));
        assert_eq!(item["ns"], AttributeValue::Ns(vec!["1".into(), "2".into()]));
        assert_eq!(
            item["bs"],
            AttributeValue::Bs(vec![Blob::new(b"hi".to_vec())])
        );
        for bad in [
            r#"{"Item": {"a": {"X": "1"}}}"#,
            r#"{"Item": {"a": {}}}"#,
            r#"{"Item": {"a": {"S": "1", "N": "1"}}}"#,
            r#"{"Item": {"a": {"B": "not base64!"}}}"#,
            r#"{"Item": {"a": {"S": 1}}}"#,
        ] {
            assert!(serde_json::from_str::<GotItem>(bad).is_err(), "{bad}");
        }
    }

    /// An error's code is read from its type, its message under either spelling, and a
    /// cancellation's reasons in order.
    #[test]
    fn refusals_read_their_code_message_and_reasons() {
        let mut r: Refusal = serde_json::from_str(
            r#"{"__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "Message": "cancelled",
                "CancellationReasons": [{"Code": "None"}, {"Code": "ConditionalCheckFailed", "Message": "no",
                                         "Item": {"PK": {"S": "a"}}}]}"#,
        )
        .unwrap();
        assert_eq!(r.code(), "TransactionCanceledException");
        assert_eq!(r.message.as_deref(), Some("cancelled"));
        let reasons = r.reasons().unwrap();
        assert_eq!(reasons.len(), 2);
        assert_eq!(reasons[0].code(), Some("None"));
        assert_eq!(reasons[1].code(), Some("ConditionalCheckFailed"));
        assert!(reasons[1].item().is_some());
        let r: Refusal =
            serde_json::from_str(r#"{"__type": "ValidationException", "message": "bad"}"#).unwrap();
        assert_eq!(
            (r.code(), r.message.as_deref()),
            ("ValidationException", Some("bad"))
        );
    }

    fn code_and_message(f: Failure) -> (String, Option<String>) {
        match f {
            Failure::Refused { code, message, .. } => (code, message),
            _ => panic!("a refusal"),
        }
    }

    /// S3's errors are read from their XML; error answers without a readable body still name
    /// their status.
    #[test]
    fn refusals_without_a_readable_body_name_their_status() {
        let s3 = "<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code>\
                  <Message>The bucket is gone</Message></Error>";
        assert_eq!(
            code_and_message(s3_refusal(404, Bytes::from(s3))),
            (
                "NoSuchBucket".to_string(),
                Some("The bucket is gone".to_string())
            )
        );
        for body in ["", "<html>bad gateway</html>", "{"] {
            assert_eq!(
                code_and_message(s3_refusal(502, Bytes::from(body))).0,
                "HTTP 502"
            );
            assert_eq!(
                code_and_message(json_refusal(502, Bytes::from(body))).0,
                "HTTP 502"
            );
        }
    }
}
