//! The HTTP API's Lambda authorizer (simple responses): a Bearer key's digest is looked up in
//! the table and only the user id is passed on (SECURITY.md T2).

use crate::KeyStore;
use aws_lambda_events::apigw::{
    ApiGatewayV2CustomAuthorizerSimpleResponse, ApiGatewayV2CustomAuthorizerV2Request,
};
use sarvcrawl_core::auth::bearer_key;
use sarvcrawl_core::ports::KeyDirectory;
use serde_json::json;

/// Authorizes a request by its `Authorization` header.
pub async fn handle(
    keys: &KeyStore,
    event: ApiGatewayV2CustomAuthorizerV2Request,
) -> ApiGatewayV2CustomAuthorizerSimpleResponse {
    let header = event
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            event
                .identity_source
                .as_ref()
                .and_then(|s| s.first())
                .map(String::as_str)
        });
    let user = match bearer_key(header) {
        Some(key) => keys.user_of(key).await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "key lookup failed");
            None
        }),
        None => None,
    };
    let mut response = ApiGatewayV2CustomAuthorizerSimpleResponse::default();
    response.is_authorized = user.is_some();
    if let Some(u) = user {
        response.context = json!({"user_id": u.as_str()});
    }
    response
}

/// Runs the authorizer function until the runtime stops it.
pub async fn run() -> Result<(), super::Error> {
    super::init_tracing();
    let names = crate::Names::from_env()?;
    let clients = crate::Clients::from_env().await;
    let keys = KeyStore::new(clients.dynamo.clone(), &names.table);
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: lambda_runtime::LambdaEvent<ApiGatewayV2CustomAuthorizerV2Request>| {
            let keys = keys.clone();
            async move { Ok::<_, super::Error>(handle(&keys, event.payload).await) }
        },
    ))
    .await
}
