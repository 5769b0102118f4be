//! A job's artifacts: files made beside its documents (a page's screenshot), stored under the
//! job's prefix so they expire with its documents, named in the document that refers to them
//! and read back only by the job's owner.

use super::{query, App, AppError};
use crate::domain::{Job, UserId};
use crate::ports::{Screenshot, StoreResult};
use bytes::Bytes;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// How long a link to an artifact in the object store stays valid.
pub const LINK_TTL: Duration = Duration::from_secs(300);

/// The name a page's files go by within its job: its URL's digest (so one page of one job has
/// one name whatever process handles it).
pub(crate) fn page_name(url: &str) -> String {
    let digest = Sha256::digest(url.as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The key of a job's artifact `name`.
fn key(user: &UserId, job: &crate::domain::JobId, name: &str) -> String {
    format!("{user}/{job}/{name}")
}

/// Whether `name` is one an artifact can have (a page name and `.png`): anything else names
/// no artifact, and no other key of the store can be reached through the route.
fn is_artifact_name(name: &str) -> bool {
    name.strip_suffix(".png")
        .is_some_and(|stem| stem.len() == 32 && stem.bytes().all(|b| b.is_ascii_hexdigit()))
        && name.bytes().all(|b| !b.is_ascii_uppercase())
}

/// Stores the screenshot of page `url` of `job`; what its document says of it.
pub(crate) async fn store_screenshot(
    app: &App,
    job: &Job,
    url: &str,
    shot: Screenshot,
) -> StoreResult<Value> {
    let name = format!("{}.png", page_name(url));
    let bytes = shot.png.len();
    app.blobs
        .put(&key(&job.user_id, &job.job_id, &name), shot.png)
        .await?;
    Ok(json!({
        "url": format!("/api/jobs/{}/artifacts/{name}", job.job_id),
        "bytes": bytes,
        "width": shot.width,
        "height": shot.height,
    }))
}

/// An artifact as the API hands it out.
pub enum Artifact {
    /// Its bytes, answered by the API itself.
    Bytes(Bytes),
    /// A short-lived link to it in the object store.
    Link(String),
}

/// The user's job's artifact `name`: `NotFound` for another user's job, a name no artifact
/// has, and one that was never stored alike.
pub async fn read(app: &App, user: &UserId, id: &str, name: &str) -> Result<Artifact, AppError> {
    let job = query::job(app, user, id).await?;
    if !is_artifact_name(name) {
        return Err(AppError::NotFound);
    }
    let key = key(&job.user_id, &job.job_id, name);
    if let Some(url) = app.blobs.download_url(&key, LINK_TTL).await? {
        return Ok(Artifact::Link(url));
    }
    let bytes = app.blobs.get(&key).await?.ok_or(AppError::NotFound)?;
    Ok(Artifact::Bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_page_names_are_artifact_names() {
        let name = format!("{}.png", page_name("https://example.com/"));
        assert!(is_artifact_name(&name));
        for bad in [
            "../x.png",
            "x.png",
            &name.to_uppercase(),
            &name.replace(".png", ".json"),
            &format!("a{name}"),
        ] {
            assert!(!is_artifact_name(bad), "{bad}");
        }
    }
}
