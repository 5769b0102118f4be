//! API keys (SECURITY.md T2): held only as SHA-256 digests; a presented key is hashed and the
//! digest looked up, so the lookup's timing says nothing about any stored key.

use crate::domain::UserId;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// How requests are authenticated.
pub enum Auth {
    /// Bearer keys, each mapping to a user.
    Keys(KeyRing),
    /// No keys configured (loopback only): every request is this one user.
    Open(UserId),
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
    /// The user an `Authorization` header value authenticates, if any.
    pub fn authenticate(&self, authorization: Option<&str>) -> Option<UserId> {
        match self {
            Auth::Open(user) => Some(user.clone()),
            Auth::Keys(ring) => ring.user_of(bearer_key(authorization)?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_authenticate_their_user_only() {
        let ring = KeyRing::parse("alice:aaaaaaaaaaaaaaaa\n# note\nbob:bbbbbbbbbbbbbbbb").unwrap();
        let auth = Auth::Keys(ring);
        assert_eq!(
            auth.authenticate(Some("Bearer aaaaaaaaaaaaaaaa")),
            Some(UserId("alice".into()))
        );
        assert_eq!(
            auth.authenticate(Some("bearer bbbbbbbbbbbbbbbb")),
            Some(UserId("bob".into()))
        );
        assert_eq!(auth.authenticate(Some("Bearer wrongwrongwrongwrong")), None);
        assert_eq!(auth.authenticate(Some("Bearer ")), None);
        assert_eq!(auth.authenticate(None), None);
        assert!(KeyRing::parse("nokey").is_err());
        assert!(KeyRing::parse("u:short").is_err());
    }
}
