//! The local HTTP server: authentication and body limits, then the core's handlers.

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::Router;
use bytes::Bytes;
use http::Request;
use sarvcrawl_core::app::App;
use sarvcrawl_core::auth::{bearer_key, Auth};
use sarvcrawl_core::domain::UserId;
use sarvcrawl_core::http::{self as api, MAX_BODY};
use sarvcrawl_core::ports::KeyDirectory;
use std::future::Future;
use std::sync::Arc;

#[derive(Clone)]
struct Server {
    app: Arc<App>,
    auth: Arc<Auth>,
    directory: Option<Arc<dyn KeyDirectory>>,
}

impl Server {
    /// The caller: a configured key, or one the backend keeps.
    async fn user(&self, authorization: Option<&str>) -> Option<UserId> {
        if let Some(user) = self.auth.authenticate(authorization) {
            return Some(user);
        }
        let key = bearer_key(authorization)?;
        match self.directory.as_ref()?.user_of(key).await {
            Ok(user) => user,
            Err(e) => {
                tracing::error!(error = %e, "key lookup failed");
                None
            }
        }
    }
}

/// Serves the API on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    auth: Arc<Auth>,
    directory: Option<Arc<dyn KeyDirectory>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = Router::new().fallback(handle).with_state(Server {
        app,
        auth,
        directory,
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

fn into_axum(resp: http::Response<Bytes>) -> Response {
    resp.map(Body::from)
}

async fn handle(State(s): State<Server>, req: Request<Body>) -> Response {
    if api::is_health(req.method(), req.uri().path()) {
        return into_axum(api::health());
    }
    let authorization = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let Some(user) = s.user(authorization).await else {
        return into_axum(api::unauthorized());
    };
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        // The rest of the body stays unread: the answer closes the connection.
        Err(_) => return into_axum(api::too_large()),
    };
    into_axum(api::handle(&s.app, &user, Request::from_parts(parts, bytes)).await)
}
