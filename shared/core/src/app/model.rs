//! Structured extraction by the operator's language model (`extract` with a prompt or a JSON
//! Schema): the page's Markdown, cut to a token budget, goes to the model with the schema; an
//! answer that is not JSON or does not validate is sent back once with its errors, then the
//! page fails with `EXTRACT_FAILED`. Calls have their own deadline and their own concurrency
//! limit, held across every process of the deployment by a gate in the store, and are made
//! after the page's fetch has let go of its place at the host.

use super::document::Built;
use super::App;
use crate::domain::{ErrorCode, JobError};
use crate::ports::{ChatMessage, LanguageModel};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Bytes of Markdown counted as one token when cutting a page to the budget (a rough,
/// model-independent measure; English prose runs at about four).
pub const BYTES_PER_TOKEN: usize = 4;
/// Errors of an answer quoted back to the model.
const MAX_ERRORS: usize = 5;

/// How the model is used.
#[derive(Debug, Clone)]
pub struct ModelSettings {
    /// Tokens of a page's Markdown sent at most (the rest is cut, and the model is told).
    pub max_input_tokens: usize,
    /// Pages read by the model at once, across the deployment.
    pub concurrency: u32,
    /// Longest one call may take.
    pub timeout: Duration,
}

/// 8,000 tokens of input, 4 calls at once, 60 s a call.
impl Default for ModelSettings {
    fn default() -> Self {
        ModelSettings {
            max_input_tokens: 8_000,
            concurrency: 4,
            timeout: Duration::from_secs(60),
        }
    }
}

impl ModelSettings {
    /// The defaults, changed by `SARVCRAWL_LLM_MAX_INPUT_TOKENS`, `SARVCRAWL_LLM_CONCURRENCY`
    /// and `SARVCRAWL_LLM_TIMEOUT_SECS` where they are set.
    pub fn from_env() -> Result<Self, String> {
        let mut s = ModelSettings::default();
        let number = |k: &str| -> Result<Option<u64>, String> {
            match std::env::var(k).ok().filter(|v| !v.trim().is_empty()) {
                None => Ok(None),
                Some(v) => match v.trim().parse::<u64>() {
                    Ok(n) if n > 0 => Ok(Some(n)),
                    _ => Err(format!("{k} must be a positive integer")),
                },
            }
        };
        if let Some(n) = number("SARVCRAWL_LLM_MAX_INPUT_TOKENS")? {
            s.max_input_tokens = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(n) = number("SARVCRAWL_LLM_CONCURRENCY")? {
            s.concurrency = u32::try_from(n).unwrap_or(u32::MAX);
        }
        if let Some(n) = number("SARVCRAWL_LLM_TIMEOUT_SECS")? {
            s.timeout = Duration::from_secs(n);
        }
        Ok(s)
    }
}

/// The operator's model and the limits its calls keep.
pub struct Model {
    llm: Arc<dyn LanguageModel>,
    settings: ModelSettings,
}

impl Model {
    pub fn new(llm: Arc<dyn LanguageModel>, settings: ModelSettings) -> Self {
        Model { llm, settings }
    }
}

/// The gate of the model's calls.
const GATE: &str = "model";
/// Longest pause between two looks for a free place at the gate.
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// A place at the model's gate, given back when the page is read.
struct Place<'a> {
    app: &'a App,
    place: u32,
    holder: String,
}

impl Place<'_> {
    /// Takes a place among the deployment's calls to the model, waiting for one up to four
    /// calls' time; leased for both tries of a page and a margin.
    async fn take<'a>(app: &'a App, model: &Model) -> Result<Place<'a>, JobError> {
        let holder = ulid::Ulid::new().to_string();
        let timeout = model.settings.timeout;
        let lease = chrono::Duration::from_std(timeout * 2 + Duration::from_secs(30))
            .unwrap_or(chrono::Duration::minutes(5));
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(20);
        loop {
            let until = app.clock.now() + lease;
            let capacity = model.settings.concurrency.max(1);
            match app.gates.enter(GATE, capacity, &holder, until).await {
                Ok(Some(place)) => return Ok(Place { app, place, holder }),
                Ok(None) => {}
                Err(e) => return Err(failed(format!("the model's gate failed: {e}"))),
            }
            if started.elapsed() > timeout * 4 {
                return Err(failed("the model stayed busy with other pages"));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    async fn give_back(self) {
        if let Err(e) = self.app.gates.leave(GATE, self.place, &self.holder).await {
            tracing::warn!(error = %e, "a place at the model's gate was not given back");
        }
    }
}

/// Tokens one page's extraction took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Usage {
    pub prompt: u64,
    pub completion: u64,
}

impl Usage {
    fn total(self) -> u64 {
        self.prompt + self.completion
    }
}

/// Has the model read the page `url` of `built` as `prompt` and `schema` ask: the answer in
/// `json` and the tokens in `extract_usage`; the Markdown stays only when `keep_markdown`.
/// Answers the tokens the reading took, whether it came out or not.
pub(crate) async fn read_page(
    app: &App,
    mut built: Built,
    prompt: Option<&str>,
    schema: Option<&Value>,
    url: &str,
    keep_markdown: bool,
) -> (Result<Built, JobError>, u64) {
    let markdown = match built.doc.get("markdown").and_then(Value::as_str) {
        Some(m) => m.to_string(),
        None => String::new(),
    };
    if !keep_markdown {
        if let Value::Object(m) = &mut built.doc {
            m.remove("markdown");
        }
    }
    let mut usage = Usage::default();
    let Some(model) = &app.model else {
        return (Err(failed("no language model is configured here")), 0);
    };
    let place = match Place::take(app, model).await {
        Ok(p) => p,
        Err(e) => return (Err(e), 0),
    };
    let read = ask(model, prompt, schema, url, &markdown, &mut usage).await;
    place.give_back().await;
    let read = read.map(|json| {
        built.doc["json"] = json;
        built.doc["extract_usage"] = json!({
            "model": model.llm.name(),
            "prompt_tokens": usage.prompt,
            "completion_tokens": usage.completion,
        });
        built.tokens = usage.total();
        built
    });
    (read, usage.total())
}

fn failed(why: impl Into<String>) -> JobError {
    JobError::new(ErrorCode::ExtractFailed, why)
}

/// The model's valid answer, asked again once with the errors of an invalid one.
async fn ask(
    model: &Model,
    prompt: Option<&str>,
    schema: Option<&Value>,
    url: &str,
    markdown: &str,
    usage: &mut Usage,
) -> Result<Value, JobError> {
    let validator = match schema.map(jsonschema::draft202012::new) {
        Some(Ok(v)) => Some(v),
        Some(Err(e)) => return Err(failed(format!("the schema is not valid: {e}"))),
        None => None,
    };
    let mut messages = first_messages(
        prompt,
        schema,
        url,
        markdown,
        model.settings.max_input_tokens,
    );
    for attempt in 0..2 {
        let answer = tokio::time::timeout(model.settings.timeout, model.llm.chat(&messages))
            .await
            .map_err(|_| {
                failed(format!(
                    "the model did not answer within {} s",
                    model.settings.timeout.as_secs()
                ))
            })?
            .map_err(failed)?;
        usage.prompt += answer.prompt_tokens;
        usage.completion += answer.completion_tokens;
        let errors = match parse_json(&answer.content) {
            Some(v) => match &validator {
                Some(validator) => {
                    let errors: Vec<String> = validator
                        .iter_errors(&v)
                        .take(MAX_ERRORS)
                        .map(|e| format!("{} (at {})", e, e.instance_path()))
                        .collect();
                    if errors.is_empty() {
                        return Ok(v);
                    }
                    errors
                }
                None => return Ok(v),
            },
            None => vec!["the answer is not JSON".to_string()],
        };
        let errors = errors.join("; ");
        if attempt == 1 {
            return Err(failed(format!(
                "the model's answer is not valid after a second try: {errors}"
            )));
        }
        messages.push(ChatMessage::new("assistant", answer.content));
        messages.push(ChatMessage::new(
            "user",
            format!(
                "That answer is not valid: {errors}. Answer again with only the corrected JSON."
            ),
        ));
    }
    Err(failed("the model gave no valid answer"))
}

/// The instructions and the page, its Markdown cut to `max_tokens`.
fn first_messages(
    prompt: Option<&str>,
    schema: Option<&Value>,
    url: &str,
    markdown: &str,
    max_tokens: usize,
) -> Vec<ChatMessage> {
    let mut system = "You extract structured data from one web page. Answer with a single JSON \
                      value and nothing else: no prose, no code fences."
        .to_string();
    if let Some(s) = schema {
        system.push_str(&format!(
            "\nThe answer must validate against this JSON Schema (draft 2020-12):\n{s}"
        ));
    }
    let limit = max_tokens.saturating_mul(BYTES_PER_TOKEN);
    let (page, cut) = if markdown.len() > limit {
        let mut end = limit;
        while !markdown.is_char_boundary(end) {
            end -= 1;
        }
        (&markdown[..end], " (cut short: only its beginning follows)")
    } else {
        (markdown, "")
    };
    let task = prompt.unwrap_or("Extract the data the schema describes.");
    vec![
        ChatMessage::new("system", system),
        ChatMessage::new(
            "user",
            format!("{task}\n\nThe page {url} as Markdown{cut}:\n\n{page}"),
        ),
    ]
}

/// The JSON of an answer: the whole of it, else what a code fence holds, else the span from
/// the first `{` or `[` to the last `}` or `]`.
fn parse_json(answer: &str) -> Option<Value> {
    let text = answer.trim();
    if let Ok(v) = serde_json::from_str(text) {
        return Some(v);
    }
    let fenced = text
        .split_once("```")
        .map(|(_, rest)| rest.trim_start_matches("json"))
        .and_then(|rest| rest.split_once("```"))
        .map(|(inside, _)| inside.trim());
    if let Some(v) = fenced.and_then(|f| serde_json::from_str(f).ok()) {
        return Some(v);
    }
    let start = text.find(['{', '['])?;
    let end = text.rfind(['}', ']'])?;
    serde_json::from_str(text.get(start..=end)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_with_or_without_fences() {
        assert_eq!(parse_json(r#"{"a":1}"#), Some(json!({"a": 1})));
        assert_eq!(
            parse_json("Here:\n```json\n[1, 2]\n```\nDone."),
            Some(json!([1, 2]))
        );
        assert_eq!(
            parse_json(r#"The data is {"a": "b"} as asked."#),
            Some(json!({"a": "b"}))
        );
        assert_eq!(parse_json("no json here"), None);
    }

    #[test]
    fn the_page_is_cut_to_the_budget_on_a_character_boundary() {
        let page = "é".repeat(100);
        let m = first_messages(Some("p"), None, "https://e.com/", &page, 10);
        let user = &m[1].content;
        assert!(user.contains("cut short"), "{user}");
        assert!(user.ends_with(&"é".repeat(20)), "{user}");
        let m = first_messages(None, Some(&json!({"type": "object"})), "u", "short", 10);
        assert!(m[0].content.contains(r#"{"type":"object"}"#));
        assert!(!m[1].content.contains("cut short"));
    }
}
