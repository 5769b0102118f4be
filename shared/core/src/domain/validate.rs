//! Field-by-field parsing of JSON request bodies into typed values, collecting every problem
//! as a `{field, problem}` detail instead of stopping at the first.

use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// One problem with one field of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub field: String,
    pub problem: String,
}

/// The longest URL accepted anywhere.
pub const MAX_URL_BYTES: usize = 2048;

/// Reads typed fields out of a JSON object and remembers what was wrong.
pub struct Fields {
    map: Map<String, Value>,
    seen: BTreeSet<String>,
    problems: Vec<Problem>,
}

impl Fields {
    /// Starts from a request body; anything but a JSON object is one problem.
    pub fn from_body(body: &[u8]) -> Result<Self, Vec<Problem>> {
        let value: Value = serde_json::from_slice(body).map_err(|e| {
            vec![Problem {
                field: "body".into(),
                problem: format!("is not valid JSON: {e}"),
            }]
        })?;
        match value {
            Value::Object(map) => Ok(Fields {
                map,
                seen: BTreeSet::new(),
                problems: Vec::new(),
            }),
            _ => Err(vec![Problem {
                field: "body".into(),
                problem: "must be a JSON object".into(),
            }]),
        }
    }

    /// Records a problem found by the caller.
    pub fn problem(&mut self, field: &str, problem: impl Into<String>) {
        self.problems.push(Problem {
            field: field.into(),
            problem: problem.into(),
        });
    }

    fn take(&mut self, field: &str) -> Option<Value> {
        self.seen.insert(field.to_string());
        match self.map.get(field) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.clone()),
        }
    }

    /// The field's value as given (null counts as absent).
    pub fn value(&mut self, field: &str) -> Option<Value> {
        self.take(field)
    }

    /// A required absolute http(s) URL of at most [`MAX_URL_BYTES`].
    pub fn url(&mut self, field: &str) -> Option<url::Url> {
        match self.take(field) {
            None => {
                self.problem(field, "is required");
                None
            }
            Some(Value::String(s)) => match parse_web_url(&s) {
                Ok(u) => Some(u),
                Err(p) => {
                    self.problem(field, p);
                    None
                }
            },
            Some(_) => {
                self.problem(field, "must be a string");
                None
            }
        }
    }

    /// Whether the body has `field` (null counts as absent).
    pub fn has(&self, field: &str) -> bool {
        self.map.get(field).is_some_and(|v| !v.is_null())
    }

    /// An optional absolute http(s) URL of at most [`MAX_URL_BYTES`].
    pub fn optional_url(&mut self, field: &str) -> Option<url::Url> {
        if self.map.get(field).is_none_or(Value::is_null) {
            self.seen.insert(field.to_string());
            return None;
        }
        self.url(field)
    }

    pub fn boolean(&mut self, field: &str, default: bool) -> bool {
        match self.take(field) {
            None => default,
            Some(Value::Bool(b)) => b,
            Some(_) => {
                self.problem(field, "must be true or false");
                default
            }
        }
    }

    /// An integer within `min..=max`.
    pub fn integer(&mut self, field: &str, default: u64, min: u64, max: u64) -> u64 {
        match self.take(field) {
            None => default,
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if (min..=max).contains(&v) => v,
                _ => {
                    self.problem(field, format!("must be an integer from {min} to {max}"));
                    default
                }
            },
            Some(_) => {
                self.problem(field, format!("must be an integer from {min} to {max}"));
                default
            }
        }
    }

    /// An optional string of at most `max_len` bytes.
    pub fn string(&mut self, field: &str, max_len: usize) -> Option<String> {
        match self.take(field) {
            None => None,
            Some(Value::String(s)) if s.len() <= max_len => Some(s),
            Some(Value::String(_)) => {
                self.problem(field, format!("must be at most {max_len} bytes"));
                None
            }
            Some(_) => {
                self.problem(field, "must be a string");
                None
            }
        }
    }

    /// A list of any values; a value that is not a list is a problem (and `None`).
    pub fn list(&mut self, field: &str) -> Option<Vec<Value>> {
        match self.take(field)? {
            Value::Array(items) => Some(items),
            _ => {
                self.problem(field, "must be a list");
                None
            }
        }
    }

    /// A list of at most `max_items` strings of at most `max_len` bytes each.
    pub fn strings(&mut self, field: &str, max_items: usize, max_len: usize) -> Vec<String> {
        let Some(value) = self.take(field) else {
            return Vec::new();
        };
        let Value::Array(items) = value else {
            self.problem(field, "must be a list of strings");
            return Vec::new();
        };
        if items.len() > max_items {
            self.problem(field, format!("must have at most {max_items} entries"));
            return Vec::new();
        }
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Value::String(s) if !s.is_empty() && s.len() <= max_len => out.push(s),
                _ => {
                    self.problem(
                        field,
                        format!("entries must be non-empty strings of at most {max_len} bytes"),
                    );
                    return Vec::new();
                }
            }
        }
        out
    }

    /// An object of string values, bounded in entries and sizes.
    pub fn string_map(
        &mut self,
        field: &str,
        max_items: usize,
        max_len: usize,
    ) -> Vec<(String, String)> {
        let Some(value) = self.take(field) else {
            return Vec::new();
        };
        let Value::Object(map) = value else {
            self.problem(field, "must be an object of strings");
            return Vec::new();
        };
        if map.len() > max_items {
            self.problem(field, format!("must have at most {max_items} entries"));
            return Vec::new();
        }
        let mut out = Vec::with_capacity(map.len());
        for (k, v) in map {
            match v {
                Value::String(s) if k.len() + s.len() <= max_len => out.push((k, s)),
                _ => {
                    self.problem(
                        field,
                        format!("values must be strings; name and value at most {max_len} bytes"),
                    );
                    return Vec::new();
                }
            }
        }
        out
    }

    /// Rejects fields the request does not know, then yields every problem found.
    pub fn finish(mut self) -> Result<(), Vec<Problem>> {
        let unknown: Vec<String> = self
            .map
            .keys()
            .filter(|k| !self.seen.contains(*k))
            .cloned()
            .collect();
        for k in unknown {
            self.problem(&k, "is not a known field");
        }
        if self.problems.is_empty() {
            Ok(())
        } else {
            Err(self.problems)
        }
    }
}

/// Parses a URL that the service may fetch: absolute, `http` or `https`, with a host,
/// at most [`MAX_URL_BYTES`].
pub fn parse_web_url(s: &str) -> Result<url::Url, String> {
    if s.len() > MAX_URL_BYTES {
        return Err(format!("must be at most {MAX_URL_BYTES} bytes"));
    }
    let u = url::Url::parse(s).map_err(|e| format!("is not an absolute URL: {e}"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err("must use http or https".into());
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err("must have a host".into());
    }
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_and_https() {
        for bad in [
            "file:///etc/passwd",
            "ftp://example.com/",
            "gopher://example.com/",
            "data:text/html,hi",
            "javascript:alert(1)",
            "/relative",
        ] {
            assert!(parse_web_url(bad).is_err(), "{bad}");
        }
        assert!(parse_web_url("https://example.com/a?b=c").is_ok());
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_BYTES));
        assert!(parse_web_url(&long).is_err());
    }

    #[test]
    fn collects_every_problem() {
        let mut f = Fields::from_body(br#"{"limit": 0, "render": "yes", "zzz": 1}"#).unwrap();
        f.integer("limit", 10, 1, 100);
        f.boolean("render", false);
        f.url("url");
        let problems = f.finish().unwrap_err();
        let fields: Vec<_> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["limit", "render", "url", "zzz"]);
    }
}
