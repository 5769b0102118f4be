//! What `extract` asks of a page: a schema of CSS selectors run on the page as parsed (format
//! `json`), or a prompt and a JSON Schema for the operator's language model.

use super::validate::Fields;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Fields a selector schema may have in all, nested ones included.
pub const MAX_FIELDS: usize = 100;
/// Levels of fields a selector schema may have (a `nested` or `list` field's own fields are
/// one level down).
pub const MAX_DEPTH: usize = 4;
/// Longest selector, field name and attribute name.
const MAX_SELECTOR_LEN: usize = 512;
const MAX_NAME_LEN: usize = 128;
/// Longest prompt, and largest JSON Schema (as JSON), for a model.
pub const MAX_PROMPT_LEN: usize = 4096;
pub const MAX_JSON_SCHEMA_BYTES: usize = 32 * 1024;

/// A page's structured extraction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtractSpec {
    /// CSS selectors, run on the page without any model.
    Selectors(SelectorSchema),
    /// The page's Markdown read by the operator's language model.
    Model {
        prompt: Option<String>,
        schema: Option<Value>,
    },
}

/// Fields read with CSS selectors: once from the page, or once per match of `base_selector`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelectorSchema {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_selector: Option<String>,
    pub fields: Vec<Field>,
}

/// One field of a selector schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Field {
    pub name: String,
    /// Where the value is, below the element the field is read from (that element itself when
    /// absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    #[serde(rename = "type")]
    pub kind: FieldKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<Field>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

/// What a field's value is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldKind {
    Text,
    Html,
    Attribute,
    Number,
    Boolean,
    List,
    Nested,
}

impl FieldKind {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "text" => FieldKind::Text,
            "html" => FieldKind::Html,
            "attribute" => FieldKind::Attribute,
            "number" => FieldKind::Number,
            "boolean" => FieldKind::Boolean,
            "list" => FieldKind::List,
            "nested" => FieldKind::Nested,
            _ => return None,
        })
    }
}

impl ExtractSpec {
    /// Whether a language model reads the page.
    pub fn uses_model(&self) -> bool {
        matches!(self, ExtractSpec::Model { .. })
    }

    /// `extract` of a body: a selector schema when `schema` has `fields`, else a prompt and a
    /// JSON Schema for a model. Problems are named by their path
    /// (`extract.schema.fields[2].selector`).
    pub(crate) fn read(f: &mut Fields) -> Option<ExtractSpec> {
        let value = f.value("extract")?;
        let Value::Object(mut map) = value else {
            f.problem("extract", "must be an object with a schema or a prompt");
            return None;
        };
        let prompt = map.remove("prompt");
        let schema = map.remove("schema");
        for key in map.keys() {
            f.problem(
                &format!("extract.{key}"),
                "is not an option: use schema, prompt",
            );
        }
        let selectors = schema
            .as_ref()
            .and_then(Value::as_object)
            .is_some_and(|s| s.contains_key("fields"));
        if selectors {
            if prompt.is_some() {
                f.problem(
                    "extract.prompt",
                    "a schema of selectors needs no prompt: give one or the other",
                );
            }
            let Some(Value::Object(schema)) = schema else {
                return None;
            };
            return selector_schema(f, schema).map(ExtractSpec::Selectors);
        }
        let prompt = match prompt {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) if !p.trim().is_empty() && p.len() <= MAX_PROMPT_LEN => Some(p),
            Some(_) => {
                f.problem(
                    "extract.prompt",
                    "must be a non-empty string of at most 4096 bytes",
                );
                None
            }
        };
        let schema = match schema {
            None | Some(Value::Null) => None,
            Some(s @ Value::Object(_)) => {
                if s.to_string().len() > MAX_JSON_SCHEMA_BYTES {
                    f.problem("extract.schema", "is larger than 32 KiB");
                } else if let Err(e) = jsonschema::draft202012::new(&s) {
                    f.problem("extract.schema", format!("is not a valid JSON Schema: {e}"));
                }
                Some(s)
            }
            Some(_) => {
                f.problem(
                    "extract.schema",
                    "must be an object: a JSON Schema, or selectors with fields",
                );
                None
            }
        };
        if prompt.is_none() && schema.is_none() {
            f.problem("extract", "needs a schema or a prompt");
            return None;
        }
        Some(ExtractSpec::Model { prompt, schema })
    }
}

/// A selector schema's `base_selector` and `fields`.
fn selector_schema(f: &mut Fields, mut map: Map<String, Value>) -> Option<SelectorSchema> {
    let base_selector = match map.remove("base_selector") {
        None | Some(Value::Null) => None,
        Some(v) => selector(f, "extract.schema.base_selector", &v),
    };
    let fields = map.remove("fields").unwrap_or(Value::Null);
    for key in map.keys() {
        f.problem(
            &format!("extract.schema.{key}"),
            "is not an option: use base_selector, fields",
        );
    }
    let mut count = 0;
    let fields = field_list(f, "extract.schema.fields", &fields, 1, &mut count);
    if count > MAX_FIELDS {
        f.problem("extract.schema.fields", "has more than 100 fields in all");
    }
    Some(SelectorSchema {
        base_selector,
        fields,
    })
}

/// A list of fields at `path`, `depth` levels down; `count` adds up the fields of the schema.
fn field_list(
    f: &mut Fields,
    path: &str,
    value: &Value,
    depth: usize,
    count: &mut usize,
) -> Vec<Field> {
    let Some(items) = value.as_array().filter(|a| !a.is_empty()) else {
        f.problem(path, "must be a non-empty array of fields");
        return Vec::new();
    };
    if depth > MAX_DEPTH {
        f.problem(path, "is nested more than 4 levels deep");
        return Vec::new();
    }
    let mut out: Vec<Field> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        *count += 1;
        if *count > MAX_FIELDS {
            break;
        }
        let at = format!("{path}[{i}]");
        if let Some(field) = field(f, &at, item, depth, count) {
            if out.iter().any(|o| o.name == field.name) {
                f.problem(&format!("{at}.name"), "is the name of an earlier field");
            }
            out.push(field);
        }
    }
    out
}

fn field(f: &mut Fields, at: &str, item: &Value, depth: usize, count: &mut usize) -> Option<Field> {
    let Some(map) = item.as_object() else {
        f.problem(at, "must be an object with a name and a type");
        return None;
    };
    let text = |key: &str| map.get(key).and_then(Value::as_str);
    let name = match text("name") {
        Some(n) if !n.is_empty() && n.len() <= MAX_NAME_LEN => n.to_string(),
        _ => {
            f.problem(
                &format!("{at}.name"),
                "must be a non-empty string of at most 128 bytes",
            );
            String::new()
        }
    };
    let kind = match text("type").and_then(FieldKind::parse) {
        Some(k) => Some(k),
        None => {
            f.problem(
                &format!("{at}.type"),
                "must be text, html, attribute, number, boolean, list or nested",
            );
            None
        }
    };
    let selector = match map.get("selector") {
        None | Some(Value::Null) => None,
        Some(v) => selector(f, &format!("{at}.selector"), v),
    };
    let attribute = match map.get("attribute") {
        None | Some(Value::Null) => None,
        Some(Value::String(a)) if !a.is_empty() && a.len() <= MAX_NAME_LEN => Some(a.clone()),
        Some(_) => {
            f.problem(&format!("{at}.attribute"), "must be an attribute's name");
            None
        }
    };
    if kind == Some(FieldKind::Attribute) && attribute.is_none() {
        f.problem(
            &format!("{at}.attribute"),
            "is required for a field of type attribute",
        );
    }
    let fields = match (kind, map.get("fields")) {
        (Some(FieldKind::Nested), sub) => field_list(
            f,
            &format!("{at}.fields"),
            sub.unwrap_or(&Value::Null),
            depth + 1,
            count,
        ),
        (Some(FieldKind::List), Some(sub)) if !sub.is_null() => {
            field_list(f, &format!("{at}.fields"), sub, depth + 1, count)
        }
        (_, None | Some(Value::Null)) | (Some(FieldKind::List), _) => Vec::new(),
        (_, Some(_)) => {
            f.problem(
                &format!("{at}.fields"),
                "only a list or nested field has fields",
            );
            Vec::new()
        }
    };
    for key in map.keys() {
        if !["name", "selector", "type", "attribute", "fields", "default"].contains(&key.as_str()) {
            f.problem(
                &format!("{at}.{key}"),
                "is not an option: use name, selector, type, attribute, fields, default",
            );
        }
    }
    Some(Field {
        name,
        selector,
        kind: kind?,
        attribute,
        fields,
        default: map.get("default").filter(|d| !d.is_null()).cloned(),
    })
}

/// A CSS selector at `path`, parsed to be sure it is one.
fn selector(f: &mut Fields, path: &str, v: &Value) -> Option<String> {
    match v.as_str() {
        Some(s) if s.len() <= MAX_SELECTOR_LEN && scraper::Selector::parse(s).is_ok() => {
            Some(s.to_string())
        }
        _ => {
            f.problem(path, "is not a valid CSS selector");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: &str) -> Result<Option<ExtractSpec>, Vec<String>> {
        let mut f = Fields::from_body(body.as_bytes()).unwrap();
        let e = ExtractSpec::read(&mut f);
        f.finish()
            .map(|()| e)
            .map_err(|p| p.into_iter().map(|p| p.field).collect())
    }

    #[test]
    fn selector_schemas_and_model_requests_are_told_apart() {
        let s = read(
            r#"{"extract":{"schema":{"base_selector":".p","fields":[
                {"name":"name","selector":"h2","type":"text"},
                {"name":"variants","selector":"li","type":"list",
                 "fields":[{"name":"size","type":"attribute","attribute":"data-size"}]}]}}}"#,
        )
        .unwrap()
        .unwrap();
        let ExtractSpec::Selectors(s) = s else {
            panic!("selectors")
        };
        assert_eq!(s.base_selector.as_deref(), Some(".p"));
        assert_eq!(s.fields[1].fields[0].kind, FieldKind::Attribute);
        let m = read(r#"{"extract":{"prompt":"the price","schema":{"type":"object"}}}"#)
            .unwrap()
            .unwrap();
        assert!(m.uses_model());
        assert_eq!(read("{}").unwrap(), None);
    }

    #[test]
    fn problems_are_named_by_their_path() {
        let e = read(
            r#"{"extract":{"schema":{"fields":[
                {"name":"a","selector":"h2","type":"text"},
                {"name":"b","selector":"<<","type":"text"},
                {"name":"c","selector":"p","type":"attribute"},
                {"name":"a","type":"colour"}]}}}"#,
        )
        .unwrap_err();
        assert_eq!(
            e,
            [
                "extract.schema.fields[1].selector",
                "extract.schema.fields[2].attribute",
                "extract.schema.fields[3].type",
            ]
        );
        let deep = r#"{"name":"n","type":"nested","fields":[X]}"#;
        let mut inner = r#"{"name":"t","type":"text"}"#.to_string();
        for _ in 0..4 {
            inner = deep.replace('X', &inner);
        }
        let e = read(&format!(
            r#"{{"extract":{{"schema":{{"fields":[{inner}]}}}}}}"#
        ))
        .unwrap_err();
        assert_eq!(
            e,
            ["extract.schema.fields[0].fields[0].fields[0].fields[0].fields"]
        );
        let many: Vec<String> = (0..101)
            .map(|i| format!(r#"{{"name":"f{i}","type":"text"}}"#))
            .collect();
        let e = read(&format!(
            r#"{{"extract":{{"schema":{{"fields":[{}]}}}}}}"#,
            many.join(",")
        ))
        .unwrap_err();
        assert_eq!(e, ["extract.schema.fields"]);
        let e = read(r#"{"extract":{"schema":{"type":"nonsense-type"}}}"#).unwrap_err();
        assert_eq!(e, ["extract.schema"]);
    }
}
