//! API keys (SECURITY.md T2, T4): held only as SHA-256 digests; a presented key is hashed and
//! the digest looked up, so the lookup's timing says nothing about any stored key. One rule on
//! every backend: the keys of the server's configuration and those its backend keeps are
//! checked on every request; only while there are none at all is the server open, as the one
//! user `local` (and the server then listens on loopback only).

use crate::domain::UserId;
use crate::ports::KeyDirectory;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often an open server asks its backend whether keys were added since.
const RECHECK: Duration = Duration::from_secs(5);

/// Authenticates requests.
pub struct Auth {
    ring: KeyRing,
    directory: Option<Arc<dyn KeyDirectory>>,
    /// True while no key exists anywhere.
    open: AtomicBool,
    /// When an open server last asked its backend for keys.
    checked: Mutex<Instant>,
}

/// The user every request belongs to when no keys are configured.
pub const LOCAL_USER: &str = "local";

/// Digests of API keys and the users they belong to.
#[derive(Default)]
pub struct KeyRing {
    by_digest: HashMap<[u8; 32], UserId>,
}

/// The SHA-256 digest of an API key, as stored.
pub fn key_digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl KeyRing {
    /// Parses `user_id:key` entries (lines or comma-separated items); blank lines and `#`
    /// comments are ignored.
    pub fn parse(entries: &str) -> Result<Self, String> {
        let mut ring = KeyRing::default();
        for (n, item) in entries.split([',', '\n']).enumerate() {
            let item = item.trim();
            if item.is_empty() || item.starts_with('#') {
                continue;
            }
            let Some((user, key)) = item.split_once(':') else {
                return Err(format!("entry {} is not user_id:key", n + 1));
            };
            let (user, key) = (user.trim(), key.trim());
            if user.is_empty() || key.len() < 16 {
                return Err(format!(
                    "entry {} needs a user id and a key of at least 16 characters",
                    n + 1
                ));
            }
            ring.by_digest
                .insert(key_digest(key), UserId(user.to_string()));
        }
        Ok(ring)
    }

    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    pub fn merge(&mut self, other: KeyRing) {
        self.by_digest.extend(other.by_digest);
    }

    fn user_of(&self, key: &str) -> Option<UserId> {
        self.by_digest.get(&key_digest(key)).cloned()
    }
}

/// The key of an `Authorization: Bearer <key>` header value.
pub fn bearer_key(authorization: Option<&str>) -> Option<&str> {
    let (scheme, key) = authorization?.split_once(' ')?;
    let key = key.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !key.is_empty()).then_some(key)
}

impl Auth {
    /// The rule for `ring` (keys of the configuration) and `directory` (keys the backend
    /// keeps): open only when both are empty.
    pub async fn new(
        ring: KeyRing,
        directory: Option<Arc<dyn KeyDirectory>>,
    ) -> crate::ports::StoreResult<Self> {
        let kept = match &directory {
            Some(d) => d.has_keys().await?,
            None => false,
        };
        Ok(Auth {
            open: AtomicBool::new(ring.is_empty() && !kept),
            ring,
            directory,
            checked: Mutex::new(Instant::now()),
        })
    }

    /// Whether requests need no key (no key exists anywhere, as far as is known).
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }

    /// Keys of the configuration.
    pub fn configured_keys(&self) -> usize {
        self.ring.len()
    }

    /// An open server asks its backend now and then whether keys were added; once they are,
    /// it is closed for good.
    async fn still_open(&self) -> bool {
        if !self.is_open() {
            return false;
        }
        let Some(directory) = &self.directory else {
            return true;
        };
        {
            let mut checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
            if checked.elapsed() < RECHECK {
                return true;
            }
            *checked = Instant::now();
        }
        match directory.has_keys().await {
            Ok(true) => {
                tracing::warn!("API keys were added to the backend: every request now needs one");
                self.open.store(false, Ordering::SeqCst);
                false
            }
            Ok(false) => true,
            Err(e) => {
                tracing::error!(error = %e, "key lookup failed");
                false
            }
        }
    }

    /// The user an `Authorization` header value authenticates, if any.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Option<UserId> {
        if let Some(key) = bearer_key(authorization) {
            if let Some(user) = self.ring.user_of(key) {
                return Some(user);
            }
            if let Some(directory) = &self.directory {
                match directory.user_of(key).await {
                    Ok(Some(user)) => return Some(user),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::error!(error = %e, "key lookup failed");
                        return None;
                    }
                }
            }
        }
        self.still_open().await.then(|| UserId(LOCAL_USER.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend's key table, in memory (this module's unit tests only).
    struct Table(Mutex<HashMap<String, UserId>>);

    #[async_trait::async_trait]
    impl KeyDirectory for Table {
        async fn user_of(&self, key: &str) -> crate::ports::StoreResult<Option<UserId>> {
            Ok(self.0.lock().unwrap().get(key).cloned())
        }
        async fn has_keys(&self) -> crate::ports::StoreResult<bool> {
            Ok(!self.0.lock().unwrap().is_empty())
        }
    }

    #[tokio::test]
    async fn keys_authenticate_their_user_only() {
        let ring = KeyRing::parse("alice:aaaaaaaaaaaaaaaa\n# note\nbob:bbbbbbbbbbbbbbbb").unwrap();
        let auth = Auth::new(ring, None).await.unwrap();
        assert!(!auth.is_open());
        let user = |k: &'static str| {
            let auth = &auth;
            async move { auth.authenticate(Some(k)).await }
        };
        assert_eq!(
            user("Bearer aaaaaaaaaaaaaaaa").await,
            Some(UserId("alice".into()))
        );
        assert_eq!(
            user("bearer bbbbbbbbbbbbbbbb").await,
            Some(UserId("bob".into()))
        );
        assert_eq!(user("Bearer wrongwrongwrongwrong").await, None);
        assert_eq!(user("Bearer ").await, None);
        assert_eq!(auth.authenticate(None).await, None);
        assert!(KeyRing::parse("nokey").is_err());
        assert!(KeyRing::parse("u:short").is_err());
    }

    #[tokio::test]
    async fn the_backends_keys_close_an_open_server() {
        let table = Arc::new(Table(Mutex::new(HashMap::new())));
        let auth = Auth::new(KeyRing::default(), Some(table.clone()))
            .await
            .unwrap();
        assert!(auth.is_open());
        assert_eq!(
            auth.authenticate(None).await,
            Some(UserId(LOCAL_USER.into()))
        );
        table
            .0
            .lock()
            .unwrap()
            .insert("kkkkkkkkkkkkkkkk".into(), UserId("carol".into()));
        // A key of the table is its user's even while the server still counts as open.
        assert_eq!(
            auth.authenticate(Some("Bearer kkkkkkkkkkkkkkkk")).await,
            Some(UserId("carol".into()))
        );
        *auth.checked.lock().unwrap() -= RECHECK;
        assert_eq!(auth.authenticate(None).await, None);
        assert!(!auth.is_open());
        assert_eq!(
            auth.authenticate(Some("Bearer bogusbogusbogus00")).await,
            None
        );
        // With keys in the table from the start, the server is never open.
        let keyed = Auth::new(KeyRing::default(), Some(table)).await.unwrap();
        assert!(!keyed.is_open());
        assert_eq!(keyed.authenticate(None).await, None);
    }
}
