//! An OpenAI-compatible chat-completions server on 127.0.0.1 for the tests: it records every
//! request and answers each with what its responder makes of it, with a fixed usage (100
//! prompt tokens, 20 completion tokens an answer).

use axum::extract::State;
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Prompt tokens each answer reports.
pub const PROMPT_TOKENS: u64 = 100;
/// Completion tokens each answer reports.
pub const COMPLETION_TOKENS: u64 = 20;

type Responder = dyn Fn(&Value) -> String + Send + Sync;

struct ModelState {
    requests: Mutex<Vec<(Option<String>, Value)>>,
    responder: Box<Responder>,
    /// How long each answer takes.
    delay: std::time::Duration,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

/// The fixture model server.
pub struct FakeModel {
    pub addr: SocketAddr,
    state: Arc<ModelState>,
}

impl FakeModel {
    /// A server answering each request (its JSON body) with `responder`'s message content.
    pub async fn start(responder: impl Fn(&Value) -> String + Send + Sync + 'static) -> FakeModel {
        FakeModel::slow(std::time::Duration::ZERO, responder).await
    }

    /// [`FakeModel::start`] taking `delay` for each answer.
    pub async fn slow(
        delay: std::time::Duration,
        responder: impl Fn(&Value) -> String + Send + Sync + 'static,
    ) -> FakeModel {
        let state = Arc::new(ModelState {
            requests: Mutex::new(Vec::new()),
            responder: Box::new(responder),
            delay,
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind model");
        let addr = listener.local_addr().expect("model address");
        let app = Router::new()
            .route("/v1/chat/completions", post(complete))
            .with_state(state.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeModel { addr, state }
    }

    /// The base URL the service is configured with.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The most requests it was answering at once.
    pub fn most_at_once(&self) -> usize {
        self.state.most_in_flight.load(Ordering::SeqCst)
    }

    /// Every request so far: its bearer token and its JSON body.
    pub fn requests(&self) -> Vec<(Option<String>, Value)> {
        self.state
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }
}

/// The text of a request's messages, in order.
pub fn messages_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter_map(|m| m["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

async fn complete(
    State(state): State<Arc<ModelState>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.most_in_flight.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(state.delay).await;
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    let content = (state.responder)(&body);
    if let Ok(mut r) = state.requests.lock() {
        r.push((token, body));
    }
    let answer = json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS,
                  "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS}
    });
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        answer.to_string(),
    )
}
