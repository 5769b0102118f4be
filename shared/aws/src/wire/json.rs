//! The JSON of DynamoDB's and SQS's requests, written from the SDK's input types. The
//! parameters of the current API are written but for the capacity and collection reports
//! (`ReturnConsumedCapacity`, `ReturnItemCollectionMetrics`), which the stores never ask for;
//! an input setting a legacy one (`AttributesToGet`, `Expected`, `KeyConditions`,
//! `QueryFilter`, `ConditionalOperator`, SQS's `AttributeNames`) or message attributes is
//! refused, so that nothing else asked is silently dropped.

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, KeysAndAttributes, Put, ReturnValue,
    ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update, WriteRequest,
};
use std::collections::HashMap;

/// A request's body being written.
pub(crate) struct Body(Vec<u8>);

/// Why an input cannot be written.
#[derive(Debug, thiserror::Error)]
#[error("{0} is not supported by this client")]
pub(crate) struct Unsupported(pub &'static str);

impl Body {
    pub fn new() -> Self {
        Body(Vec::with_capacity(256))
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    fn raw(&mut self, s: &str) {
        self.0.extend_from_slice(s.as_bytes());
    }

    fn string(&mut self, s: &str) {
        self.0.push(b'"');
        let bytes = s.as_bytes();
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let escape: &[u8] = match b {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0..=0x1f => b"",
                _ => continue,
            };
            self.0.extend_from_slice(&bytes[start..i]);
            if escape.is_empty() {
                self.raw(&format!("\\u{b:04x}"));
            } else {
                self.0.extend_from_slice(escape);
            }
            start = i + 1;
        }
        self.0.extend_from_slice(&bytes[start..]);
        self.0.push(b'"');
    }

    /// Opens an object; fields follow through [`Obj`].
    pub fn object(&mut self) -> Obj<'_> {
        self.0.push(b'{');
        Obj {
            body: self,
            first: true,
        }
    }

    fn value(&mut self, v: &AttributeValue) {
        let (tag, strings): (&str, Option<&[String]>) = match v {
            AttributeValue::S(s) => {
                self.raw("{\"S\":");
                self.string(s);
                return self.raw("}");
            }
            AttributeValue::N(n) => {
                self.raw("{\"N\":");
                self.string(n);
                return self.raw("}");
            }
            AttributeValue::Bool(b) => {
                return self.raw(if *b {
                    "{\"BOOL\":true}"
                } else {
                    "{\"BOOL\":false}"
                })
            }
            AttributeValue::Null(_) => return self.raw("{\"NULL\":true}"),
            AttributeValue::B(b) => {
                self.raw("{\"B\":");
                self.string(&base64(b.as_ref()));
                return self.raw("}");
            }
            AttributeValue::M(m) => {
                self.raw("{\"M\":");
                self.item(m);
                return self.raw("}");
            }
            AttributeValue::L(l) => {
                self.raw("{\"L\":[");
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        self.raw(",");
                    }
                    self.value(v);
                }
                return self.raw("]}");
            }
            AttributeValue::Ss(s) => ("SS", Some(s)),
            AttributeValue::Ns(s) => ("NS", Some(s)),
            AttributeValue::Bs(s) => {
                let encoded: Vec<String> = s.iter().map(|b| base64(b.as_ref())).collect();
                return self.strings_tagged("BS", &encoded);
            }
            // A variant added to the SDK after this was written: DynamoDB would refuse it.
            _ => ("NULL", None),
        };
        match strings {
            Some(s) => self.strings_tagged(tag, s),
            None => self.raw("{\"NULL\":true}"),
        }
    }

    fn strings_tagged(&mut self, tag: &str, strings: &[String]) {
        self.raw("{\"");
        self.raw(tag);
        self.raw("\":[");
        for (i, s) in strings.iter().enumerate() {
            if i > 0 {
                self.raw(",");
            }
            self.string(s);
        }
        self.raw("]}");
    }

    fn item(&mut self, item: &HashMap<String, AttributeValue>) {
        let mut o = self.object();
        for (k, v) in item {
            o.key(k);
            o.body.value(v);
        }
        o.end();
    }

    fn strings_map(&mut self, map: &HashMap<String, String>) {
        let mut o = self.object();
        for (k, v) in map {
            o.key(k);
            o.body.string(v);
        }
        o.end();
    }
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// An object's fields being written.
pub(crate) struct Obj<'a> {
    body: &'a mut Body,
    first: bool,
}

impl Obj<'_> {
    fn key(&mut self, k: &str) {
        if !self.first {
            self.body.raw(",");
        }
        self.first = false;
        self.body.string(k);
        self.body.raw(":");
    }

    pub fn str(&mut self, k: &str, v: Option<&str>) -> &mut Self {
        if let Some(v) = v {
            self.key(k);
            self.body.string(v);
        }
        self
    }

    pub fn bool(&mut self, k: &str, v: Option<bool>) -> &mut Self {
        if let Some(v) = v {
            self.key(k);
            self.body.raw(if v { "true" } else { "false" });
        }
        self
    }

    pub fn int(&mut self, k: &str, v: Option<i32>) -> &mut Self {
        if let Some(v) = v {
            self.key(k);
            self.body.raw(&v.to_string());
        }
        self
    }

    pub fn item(&mut self, k: &str, v: Option<&HashMap<String, AttributeValue>>) -> &mut Self {
        if let Some(v) = v {
            self.key(k);
            self.body.item(v);
        }
        self
    }

    /// `ExpressionAttributeNames` and `ExpressionAttributeValues`, when given.
    pub fn expression(
        &mut self,
        names: Option<&HashMap<String, String>>,
        values: Option<&HashMap<String, AttributeValue>>,
    ) -> &mut Self {
        if let Some(names) = names {
            self.key("ExpressionAttributeNames");
            self.body.strings_map(names);
        }
        self.item("ExpressionAttributeValues", values)
    }

    pub fn strings(&mut self, k: &str, v: &[impl AsRef<str>]) -> &mut Self {
        if !v.is_empty() {
            self.key(k);
            self.body.raw("[");
            for (i, s) in v.iter().enumerate() {
                if i > 0 {
                    self.body.raw(",");
                }
                self.body.string(s.as_ref());
            }
            self.body.raw("]");
        }
        self
    }

    /// A write's `ReturnValues` and `ReturnValuesOnConditionCheckFailure`, when given.
    pub fn returns(
        &mut self,
        values: Option<&ReturnValue>,
        on_failure: Option<&ReturnValuesOnConditionCheckFailure>,
    ) -> &mut Self {
        self.str("ReturnValues", values.map(|v| v.as_str())).str(
            "ReturnValuesOnConditionCheckFailure",
            on_failure.map(|v| v.as_str()),
        )
    }

    /// A field whose value `write` writes.
    pub fn with(&mut self, k: &str, write: impl FnOnce(&mut Body)) -> &mut Self {
        self.key(k);
        write(self.body);
        self
    }

    pub fn end(&mut self) {
        self.body.raw("}");
    }
}

/// Refuses an input that sets a legacy parameter.
pub(crate) fn refuse<T>(name: &'static str, set: Option<T>) -> Result<(), Unsupported> {
    match set {
        Some(_) => Err(Unsupported(name)),
        None => Ok(()),
    }
}

/// `Some` for a list an input set.
pub(crate) fn non_empty<T>(list: &[T]) -> Option<&[T]> {
    (!list.is_empty()).then_some(list)
}

/// A list written element by element.
pub(crate) fn list<T>(
    body: &mut Body,
    items: &[T],
    mut write: impl FnMut(&mut Body, &T) -> Result<(), Unsupported>,
) -> Result<(), Unsupported> {
    body.raw("[");
    for (i, t) in items.iter().enumerate() {
        if i > 0 {
            body.raw(",");
        }
        write(body, t)?;
    }
    body.raw("]");
    Ok(())
}

/// One item of `TransactWriteItems`.
pub(crate) fn transact_item(body: &mut Body, t: &TransactWriteItem) -> Result<(), Unsupported> {
    let mut o = body.object();
    if let Some(c) = t.condition_check() {
        o.with("ConditionCheck", |b| condition_check(b, c));
    }
    if let Some(p) = t.put() {
        o.with("Put", |b| put(b, p));
    }
    if let Some(d) = t.delete() {
        o.with("Delete", |b| delete(b, d));
    }
    if let Some(u) = t.update() {
        o.with("Update", |b| update(b, u));
    }
    o.end();
    Ok(())
}

fn on_failure(o: &mut Obj, v: Option<&ReturnValuesOnConditionCheckFailure>) {
    o.returns(None, v);
}

fn condition_check(body: &mut Body, c: &ConditionCheck) {
    let mut o = body.object();
    o.str("TableName", Some(c.table_name()))
        .item("Key", Some(c.key()))
        .str("ConditionExpression", Some(c.condition_expression()))
        .expression(
            c.expression_attribute_names(),
            c.expression_attribute_values(),
        );
    on_failure(&mut o, c.return_values_on_condition_check_failure());
    o.end();
}

fn put(body: &mut Body, p: &Put) {
    let mut o = body.object();
    o.str("TableName", Some(p.table_name()))
        .item("Item", Some(p.item()))
        .str("ConditionExpression", p.condition_expression())
        .expression(
            p.expression_attribute_names(),
            p.expression_attribute_values(),
        );
    on_failure(&mut o, p.return_values_on_condition_check_failure());
    o.end();
}

fn delete(body: &mut Body, d: &Delete) {
    let mut o = body.object();
    o.str("TableName", Some(d.table_name()))
        .item("Key", Some(d.key()))
        .str("ConditionExpression", d.condition_expression())
        .expression(
            d.expression_attribute_names(),
            d.expression_attribute_values(),
        );
    on_failure(&mut o, d.return_values_on_condition_check_failure());
    o.end();
}

fn update(body: &mut Body, u: &Update) {
    let mut o = body.object();
    o.str("TableName", Some(u.table_name()))
        .item("Key", Some(u.key()))
        .str("UpdateExpression", Some(u.update_expression()))
        .str("ConditionExpression", u.condition_expression())
        .expression(
            u.expression_attribute_names(),
            u.expression_attribute_values(),
        );
    on_failure(&mut o, u.return_values_on_condition_check_failure());
    o.end();
}

/// One request of `BatchWriteItem`.
pub(crate) fn write_request(body: &mut Body, w: &WriteRequest) -> Result<(), Unsupported> {
    let mut o = body.object();
    if let Some(p) = w.put_request() {
        o.with("PutRequest", |b| {
            b.object().item("Item", Some(p.item())).end();
        });
    }
    if let Some(d) = w.delete_request() {
        o.with("DeleteRequest", |b| {
            b.object().item("Key", Some(d.key())).end();
        });
    }
    o.end();
    Ok(())
}

/// The keys of one table in `BatchGetItem`.
pub(crate) fn keys_and_attributes(
    body: &mut Body,
    k: &KeysAndAttributes,
) -> Result<(), Unsupported> {
    refuse("AttributesToGet", non_empty(k.attributes_to_get()))?;
    let mut o = body.object();
    o.with("Keys", |b| {
        // Writing an item cannot fail.
        let _ = list(b, k.keys(), |b, key| {
            b.item(key);
            Ok(())
        });
    })
    .bool("ConsistentRead", k.consistent_read())
    .str("ProjectionExpression", k.projection_expression())
    .expression(k.expression_attribute_names(), None);
    o.end();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::primitives::Blob;

    fn written(v: &AttributeValue) -> serde_json::Value {
        let mut b = Body::new();
        b.value(v);
        serde_json::from_slice(&b.into_bytes()).unwrap()
    }

    /// Every kind of value is written as DynamoDB's JSON has it, strings escaped.
    #[test]
    fn values_are_written_as_dynamodbs_json() {
        let tricky = "quote \" backslash \\ nl \n tab \t nul \u{0} bell \u{7} é 𝄞";
        let item = HashMap::from([
            ("s".to_string(), AttributeValue::S(tricky.into())),
            ("n".to_string(), AttributeValue::N("-1.5e3".into())),
        ]);
        let cases = [
            (
                AttributeValue::S(tricky.into()),
                serde_json::json!({"S": tricky}),
            ),
            (
                AttributeValue::N("12".into()),
                serde_json::json!({"N": "12"}),
            ),
            (
                AttributeValue::Bool(false),
                serde_json::json!({"BOOL": false}),
            ),
            (
                AttributeValue::Null(true),
                serde_json::json!({"NULL": true}),
            ),
            (
                AttributeValue::B(Blob::new(vec![0, 255, 7])),
                serde_json::json!({"B": "AP8H"}),
            ),
            (
                AttributeValue::M(item),
                serde_json::json!({"M": {"s": {"S": tricky}, "n": {"N": "-1.5e3"}}}),
            ),
            (
                AttributeValue::L(vec![
                    AttributeValue::N("1".into()),
                    AttributeValue::L(vec![]),
                ]),
                serde_json::json!({"L": [{"N": "1"}, {"L": []}]}),
            ),
            (
                AttributeValue::Ss(vec!["a".into(), "\"".into()]),
                serde_json::json!({"SS": ["a", "\""]}),
            ),
            (
                AttributeValue::Ns(vec!["1".into()]),
                serde_json::json!({"NS": ["1"]}),
            ),
            (
                AttributeValue::Bs(vec![Blob::new(b"hi".to_vec())]),
                serde_json::json!({"BS": ["aGk="]}),
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(written(&value), expected, "{value:?}");
        }
    }
}
