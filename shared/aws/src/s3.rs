//! Documents in S3.

use crate::Wire;
use async_trait::async_trait;
use bytes::Bytes;
use sarvcrawl_core::ports::{BlobStore, StoreError, StoreResult};

/// S3-backed [`BlobStore`].
pub struct S3Blobs {
    client: aws_sdk_s3::Client,
    /// Puts go through the wire; the rest through the SDK.
    wire: Wire,
    bucket: String,
}

impl S3Blobs {
    pub fn new(client: aws_sdk_s3::Client, wire: Wire, bucket: &str) -> Self {
        S3Blobs {
            client,
            wire,
            bucket: bucket.to_string(),
        }
    }
}

/// The type an object is stored with, by its key's extension: documents are JSON, artifacts
/// PNG images.
fn content_type_of(key: &str) -> &'static str {
    match key.rsplit_once('.').map(|(_, ext)| ext) {
        Some("json") => "application/json",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}

#[async_trait]
impl BlobStore for S3Blobs {
    async fn put(&self, key: &str, body: Bytes) -> StoreResult<()> {
        self.wire
            .put_object(&self.bucket, key, content_type_of(key), body)
            .await
            .map_err(crate::errors::sdk)
    }

    async fn get(&self, key: &str) -> StoreResult<Option<Bytes>> {
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(o) => o,
            Err(e) => {
                if e.as_service_error().is_some_and(|s| s.is_no_such_key()) {
                    return Ok(None);
                }
                return Err(crate::errors::sdk(e));
            }
        };
        let body = out.body.collect().await.map_err(StoreError::new)?;
        Ok(Some(body.into_bytes()))
    }

    async fn upload_url(
        &self,
        key: &str,
        content_type: &str,
        bytes: u64,
        ttl: std::time::Duration,
    ) -> StoreResult<Option<String>> {
        let config =
            aws_sdk_s3::presigning::PresigningConfig::expires_in(ttl).map_err(StoreError::new)?;
        // The signature covers the type and the length: the object is exactly what was
        // announced.
        let presigned = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .content_length(i64::try_from(bytes).map_err(StoreError::new)?)
            .presigned(config)
            .await
            .map_err(crate::errors::sdk)?;
        Ok(Some(presigned.uri().to_string()))
    }

    async fn download_url(
        &self,
        key: &str,
        ttl: std::time::Duration,
    ) -> StoreResult<Option<String>> {
        let head = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await;
        if let Err(e) = head {
            if e.as_service_error().is_some_and(|s| s.is_not_found()) {
                return Ok(None);
            }
            return Err(crate::errors::sdk(e));
        }
        let config =
            aws_sdk_s3::presigning::PresigningConfig::expires_in(ttl).map_err(StoreError::new)?;
        let presigned = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(config)
            .await
            .map_err(crate::errors::sdk)?;
        Ok(Some(presigned.uri().to_string()))
    }

    async fn delete(&self, key: &str) -> StoreResult<()> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(crate::errors::sdk)?;
        Ok(())
    }
}
