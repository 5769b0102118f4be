//! The HTTP API behind API Gateway (HTTP API, payload 2.0): the authorizer's user id in, the
//! core's transport-neutral handlers, the response out.

use bytes::Bytes;
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use sarvcrawl_core::app::App;
use sarvcrawl_core::domain::UserId;
use sarvcrawl_core::http::{self as api, MAX_BODY};

/// The user id the Lambda authorizer put in the request context.
fn user_of(req: &Request) -> Option<UserId> {
    match req.request_context() {
        RequestContext::ApiGatewayV2(ctx) => ctx
            .authorizer
            .as_ref()
            .and_then(|a| a.fields.get("user_id"))
            .and_then(|v| v.as_str())
            .filter(|u| !u.is_empty())
            .map(|u| UserId(u.to_string())),
        _ => None,
    }
}

/// Answers one API request.
pub async fn handle(app: &App, req: Request) -> Response<Body> {
    let resp = if api::is_health(req.method(), req.uri().path()) {
        api::health()
    } else {
        match user_of(&req) {
            None => api::unauthorized(),
            Some(user) => {
                let (parts, body) = req.into_parts();
                let bytes = match body {
                    Body::Empty => Bytes::new(),
                    Body::Text(t) => Bytes::from(t),
                    Body::Binary(b) => Bytes::from(b),
                    _ => Bytes::new(),
                };
                if bytes.len() > MAX_BODY {
                    api::too_large()
                } else {
                    api::handle(app, &user, http::Request::from_parts(parts, bytes)).await
                }
            }
        }
    };
    resp.map(|b| Body::Text(String::from_utf8_lossy(&b).into_owned()))
}

/// Runs an HTTP API function until the runtime stops it.
pub async fn run() -> Result<(), super::Error> {
    super::init_tracing();
    let deployment = super::Deployment::from_env().await?;
    let app = deployment.app.clone();
    lambda_http::run(lambda_http::service_fn(move |req: Request| {
        let app = app.clone();
        async move { Ok::<_, super::Error>(handle(&app, req).await) }
    }))
    .await
}
