//! A selector schema run on a parsed page: one object of fields, or one per match of the base
//! selector, every value read from the elements its selector finds (format `json`).

use super::meter::Meter;
use crate::domain::{Field, FieldKind, SelectorSchema};
use scraper::{ElementRef, Html, Selector};
use serde_json::{json, Map, Number, Value};

/// Matches of a base selector or of a list taken at most.
pub const MAX_MATCHES: usize = 10_000;

/// A field with its selector parsed.
struct Compiled<'s> {
    field: &'s Field,
    selector: Option<Selector>,
    fields: Vec<Compiled<'s>>,
}

fn compile(fields: &[Field]) -> Vec<Compiled<'_>> {
    fields
        .iter()
        .map(|field| Compiled {
            field,
            // Validated with the request: a selector that does not parse matches nothing.
            selector: field
                .selector
                .as_deref()
                .map(|s| Selector::parse(s).unwrap_or_else(|_| nothing())),
            fields: compile(&field.fields),
        })
        .collect()
}

/// A selector no element matches.
fn nothing() -> Selector {
    Selector::parse(":not(*)").unwrap_or_else(|_| unreachable!("a valid selector"))
}

/// The schema's result on `doc`: an array with one object per match of its base selector, or
/// one object. What it builds is counted by `meter`.
pub(crate) fn run(doc: &Html, schema: &SelectorSchema, meter: &Meter) -> Value {
    let fields = compile(&schema.fields);
    let root = doc.root_element();
    match &schema.base_selector {
        Some(base) => {
            let base = Selector::parse(base).unwrap_or_else(|_| nothing());
            let items = root
                .select(&base)
                .take(MAX_MATCHES)
                .take_while(|_| meter.step())
                .map(|el| object(el, &fields, meter))
                .collect();
            Value::Array(items)
        }
        None => object(root, &fields, meter),
    }
}

/// The fields read from `el`.
fn object(el: ElementRef, fields: &[Compiled], meter: &Meter) -> Value {
    let mut out = Map::new();
    for c in fields {
        // Each field searches a subtree: the deadline is looked at before every one.
        if !meter.check_now() {
            break;
        }
        out.insert(c.field.name.clone(), value(el, c, meter));
    }
    Value::Object(out)
}

/// One field's value below `el`: its default (or null) when nothing matches.
fn value(el: ElementRef, c: &Compiled, meter: &Meter) -> Value {
    let fallback = || c.field.default.clone().unwrap_or(Value::Null);
    if c.field.kind == FieldKind::List {
        let matches: Vec<ElementRef> = match &c.selector {
            Some(s) => el
                .select(s)
                .take(MAX_MATCHES)
                .take_while(|_| meter.step())
                .collect(),
            None => vec![el],
        };
        if matches.is_empty() {
            return c.field.default.clone().unwrap_or_else(|| json!([]));
        }
        let items = matches.into_iter().map(|m| {
            if c.fields.is_empty() {
                text(m, meter).map_or(Value::Null, Value::String)
            } else {
                object(m, &c.fields, meter)
            }
        });
        return Value::Array(items.collect());
    }
    let found = match &c.selector {
        Some(s) => el.select(s).next(),
        None => Some(el),
    };
    let Some(found) = found else {
        return fallback();
    };
    let v = match c.field.kind {
        FieldKind::Text => text(found, meter).map(Value::String),
        FieldKind::Html => {
            let html = found.html();
            meter.add(html.len()).then_some(Value::String(html))
        }
        FieldKind::Attribute => c
            .field
            .attribute
            .as_deref()
            .and_then(|a| found.value().attr(a))
            .map(|v| Value::String(v.trim().to_string())),
        FieldKind::Number => text(found, meter)
            .and_then(|t| number(&t))
            .map(Value::Number),
        FieldKind::Boolean => Some(Value::Bool(boolean(found, c.field, meter))),
        FieldKind::Nested => Some(object(found, &c.fields, meter)),
        FieldKind::List => None,
    };
    v.unwrap_or_else(fallback)
}

/// An element's text, whitespace collapsed and trimmed.
fn text(el: ElementRef, meter: &Meter) -> Option<String> {
    let mut out = String::new();
    for piece in el.text() {
        for word in piece.split_whitespace() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(word);
        }
    }
    meter.add(out.len()).then_some(out)
}

/// A found element as a boolean: its text (or its attribute's value) when that reads as one
/// (`true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0`), else true: the element is there.
fn boolean(el: ElementRef, field: &Field, meter: &Meter) -> bool {
    let said = match field.attribute.as_deref() {
        Some(a) => el.value().attr(a).map(str::to_string),
        None => text(el, meter),
    };
    !matches!(
        said.as_deref().map(str::to_ascii_lowercase).as_deref(),
        Some("false" | "no" | "off" | "0")
    )
}

/// The first number in `text`: thousands separators (`,` `.` `'`, spaces) and a decimal comma
/// understood (`1,234.50`, `1.234,50`, `12,5`, `1 234`), a sign kept.
pub(crate) fn number(text: &str) -> Option<Number> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let negative = text[..start].trim_end().ends_with('-');
    let run: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, ',' | '.' | '\'' | ' ' | '\u{a0}'))
        .collect();
    let run = run.trim_end_matches(|c: char| !c.is_ascii_digit());
    // The decimal separator: the last `.` or `,` unless it groups thousands.
    let last = run.rfind(['.', ',']);
    let decimal = last.filter(|&i| {
        let sep = run.as_bytes()[i];
        let after = run[i + 1..].len();
        let repeated = run[..i].contains(sep as char);
        let other = if sep == b'.' { ',' } else { '.' };
        let mixed = run[..i].contains(other);
        mixed || !(repeated || (sep == b',' && after == 3))
    });
    let mut digits = String::new();
    for (i, c) in run.char_indices() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else if Some(i) == decimal {
            digits.push('.');
        }
    }
    if negative {
        digits.insert(0, '-');
    }
    if decimal.is_none() {
        if let Ok(n) = digits.parse::<i64>() {
            return Some(n.into());
        }
    }
    digits.parse::<f64>().ok().and_then(Number::from_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_with_their_separators() {
        let n = |s: &str| number(s).map(|n| n.to_string());
        for (text, want) in [
            ("$1,234.50", "1234.5"),
            ("1.234,50 €", "1234.5"),
            ("12,5 kg", "12.5"),
            ("1,234", "1234"),
            ("1.234.567", "1234567"),
            ("Price: 19.99", "19.99"),
            ("CHF 1'299.–", "1299"),
            ("1 234 567 units", "1234567"),
            ("-3 degrees", "-3"),
            ("42", "42"),
        ] {
            assert_eq!(n(text).as_deref(), Some(want), "{text}");
        }
        assert_eq!(n("no digits"), None);
    }
}
