//! The operator's language model: an OpenAI-compatible chat-completions endpoint (a hosted
//! service, or Ollama, vLLM or llama.cpp's server on the operator's network).
//!
//! Its base URL is the operator's configuration, never a user's, so it is the one address
//! requests reach without the address guard; it goes out on a plain client of its own (no
//! redirects, no proxies, a deadline), and its answers are read to a bounded size.

use crate::ports::{ChatAnswer, ChatMessage, LanguageModel};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Largest answer read from the endpoint.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// Most tokens a model may write in one answer.
const MAX_COMPLETION_TOKENS: u64 = 4096;

/// The model `SARVCRAWL_LLM_BASE_URL` and `SARVCRAWL_LLM_MODEL` configure (with the optional
/// `SARVCRAWL_LLM_API_KEY`), if any.
pub fn from_env() -> Result<Option<Arc<dyn LanguageModel>>, String> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let Some(base) = var("SARVCRAWL_LLM_BASE_URL") else {
        return Ok(None);
    };
    let model = var("SARVCRAWL_LLM_MODEL")
        .ok_or("SARVCRAWL_LLM_BASE_URL is set: SARVCRAWL_LLM_MODEL must name the model")?;
    let chat = OpenAiChat::new(&base, &model, var("SARVCRAWL_LLM_API_KEY"))?;
    Ok(Some(Arc::new(chat)))
}

/// A chat-completions endpoint (`{base}/chat/completions`).
pub struct OpenAiChat {
    client: reqwest::Client,
    url: url::Url,
    model: String,
    api_key: Option<String>,
}

impl OpenAiChat {
    /// The endpoint under `base` (`https://api.openai.com/v1`, `http://10.0.0.5:11434/v1`),
    /// asking `model`, with `api_key` as a bearer token when given.
    pub fn new(base: &str, model: &str, api_key: Option<String>) -> Result<Self, String> {
        let mut url = url::Url::parse(base).map_err(|e| format!("SARVCRAWL_LLM_BASE_URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("SARVCRAWL_LLM_BASE_URL must be an http(s) URL".into());
        }
        let path = format!("{}/chat/completions", url.path().trim_end_matches('/'));
        url.set_path(&path);
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .user_agent(crate::engine::fetch::default_user_agent())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(OpenAiChat {
            client,
            url,
            model: model.to_string(),
            api_key,
        })
    }
}

#[async_trait]
impl LanguageModel for OpenAiChat {
    fn name(&self) -> &str {
        &self.model
    }

    async fn chat(&self, messages: &[ChatMessage]) -> Result<ChatAnswer, String> {
        let body = json!({
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": MAX_COMPLETION_TOKENS,
        });
        let mut req = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if let Some(k) = &self.api_key {
            req = req.bearer_auth(k);
        }
        let mut resp = req
            .send()
            .await
            .map_err(|e| format!("the model's endpoint could not be reached: {e}"))?;
        let status = resp.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| format!("the model's answer broke off: {e}"))?
        {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err("the model's answer is too large".into());
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(format!("the model's endpoint answered {}", status.as_u16()));
        }
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|_| "the model's endpoint did not answer JSON".to_string())?;
        let content = v["choices"][0]["message"]["content"]
            .as_str()
            .ok_or("the model's answer has no message")?
            .to_string();
        let usage = |k: &str| v["usage"][k].as_u64().unwrap_or(0);
        Ok(ChatAnswer {
            content,
            prompt_tokens: usage("prompt_tokens"),
            completion_tokens: usage("completion_tokens"),
        })
    }
}
