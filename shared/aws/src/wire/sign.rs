//! Signature version 4 of a request without a query: its method, path, the headers it signs
//! (besides `host` and `x-amz-date`, which it always signs, and the session token with
//! temporary keys) and its payload's hash.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The keys a request is signed with.
pub(crate) struct Keys<'a> {
    pub id: &'a str,
    pub secret: &'a str,
    pub token: Option<&'a str>,
}

/// What a request is, as far as its signature goes.
pub(crate) struct Request<'a> {
    pub method: &'a str,
    pub host: &'a str,
    /// The path as sent (already percent-encoded).
    pub path: &'a str,
    /// The service's signing name (`dynamodb`, `s3`).
    pub service: &'a str,
    pub region: &'a str,
    /// Headers to sign besides `host`, `x-amz-date` and the token: lower-case names.
    pub headers: &'a [(&'a str, &'a str)],
    /// The payload's SHA-256 in hex.
    pub payload_hash: &'a str,
}

/// The SHA-256 of `body` in hex, as a signature's payload hash.
pub(crate) fn payload_hash(body: &[u8]) -> String {
    hex(&Sha256::digest(body))
}

/// The `authorization` header of `request` signed with `keys` at `time` (UTC,
/// `YYYYMMDDTHHMMSSZ`, sent as `x-amz-date`).
pub(crate) fn sign(request: &Request, keys: &Keys, time: &str) -> String {
    let day = time.get(..8).unwrap_or(time);
    let scope = format!("{day}/{}/{}/aws4_request", request.region, request.service);
    let mut headers: Vec<(&str, &str)> = Vec::with_capacity(request.headers.len() + 3);
    headers.extend_from_slice(request.headers);
    headers.push(("host", request.host));
    headers.push(("x-amz-date", time));
    if let Some(token) = keys.token {
        headers.push(("x-amz-security-token", token));
    }
    headers.sort_unstable_by_key(|h| h.0);
    let mut canonical = String::with_capacity(384);
    for part in [request.method, "\n", request.path, "\n\n"] {
        canonical.push_str(part);
    }
    for (name, value) in &headers {
        for part in [*name, ":", value.trim(), "\n"] {
            canonical.push_str(part);
        }
    }
    canonical.push('\n');
    let mut signed_headers = String::with_capacity(96);
    for (i, (name, _)) in headers.iter().enumerate() {
        if i > 0 {
            signed_headers.push(';');
        }
        signed_headers.push_str(name);
    }
    canonical.push_str(&signed_headers);
    canonical.push('\n');
    canonical.push_str(request.payload_hash);

    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{time}\n{scope}\n{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let mut key = mac(format!("AWS4{}", keys.secret).as_bytes(), day.as_bytes());
    for part in [request.region, request.service, "aws4_request"] {
        key = mac(&key, part.as_bytes());
    }
    let signature = hex(&mac(&key, to_sign.as_bytes()));
    format!(
        "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
        keys.id
    )
}

fn mac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length.
    let Ok(mut m) = Hmac::<Sha256>::new_from_slice(key) else {
        return [0; 32];
    };
    m.update(data);
    m.finalize().into_bytes().into()
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_credential_types::Credentials;
    use aws_sigv4::http_request::{
        sign as sdk_sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest,
        SigningSettings, UriPathNormalizationMode,
    };
    use aws_sigv4::sign::v4::SigningParams;
    use std::time::{Duration, UNIX_EPOCH};

    /// The SDK's own signer's `authorization` for the same request, with S3's settings for S3.
    fn sdk_authorization(request: &Request, keys: &Keys, body: &[u8], secs: u64) -> String {
        let identity = Credentials::new(
            keys.id,
            keys.secret,
            keys.token.map(str::to_string),
            None,
            "test",
        )
        .into();
        let mut settings = SigningSettings::default();
        if request.service == "s3" {
            settings.percent_encoding_mode = PercentEncodingMode::Single;
            settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
            settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        }
        let params = SigningParams::builder()
            .identity(&identity)
            .region(request.region)
            .name(request.service)
            .time(UNIX_EPOCH + Duration::from_secs(secs))
            .settings(settings)
            .build()
            .unwrap();
        let uri = format!("https://{}{}", request.host, request.path);
        let headers = request
            .headers
            .iter()
            .filter(|h| h.0 != "x-amz-content-sha256")
            .copied()
            .chain([("host", request.host)]);
        let signable =
            SignableRequest::new(request.method, &uri, headers, SignableBody::Bytes(body)).unwrap();
        let (instructions, _) = sdk_sign(signable, &params.into()).unwrap().into_parts();
        let (headers, _) = instructions.into_parts();
        headers
            .into_iter()
            .find(|h| h.name() == "authorization")
            .unwrap()
            .value()
            .to_string()
    }

    /// The signature is the SDK signer's, for DynamoDB's requests and S3's puts, with and
    /// without a session token, for bodies, hosts and paths of several shapes.
    #[test]
    fn signatures_are_the_sdk_signers() {
        let bodies: [&[u8]; 3] = [
            b"{}",
            "{\"Key\":{\"PK\":{\"S\":\"\u{e9}\"}}}".as_bytes(),
            b"",
        ];
        let mut checked = 0;
        for (i, body) in bodies.iter().enumerate() {
            let hash = payload_hash(body);
            for token in [None, Some("FwoGZXIvYXdzEJr//token+/=")] {
                for host in ["dynamodb.eu-west-1.amazonaws.com", "127.0.0.1:4566"] {
                    let keys = Keys {
                        id: "AKIDEXAMPLE",
                        secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                        token,
                    };
                    let secs = 1_700_000_000 + 86_399 * i as u64;
                    let time = chrono::DateTime::from_timestamp(secs as i64, 0)
                        .unwrap()
                        .format("%Y%m%dT%H%M%SZ")
                        .to_string();
                    let dynamodb = [
                        ("content-type", "application/x-amz-json-1.0"),
                        ("x-amz-target", "DynamoDB_20120810.GetItem"),
                    ];
                    let s3 = [
                        ("content-type", "application/json"),
                        ("x-amz-content-sha256", hash.as_str()),
                    ];
                    let requests = [
                        ("POST", "/", "dynamodb", &dynamodb[..]),
                        ("PUT", "/bucket/docs/u%20s/j-1/a~b_c.json", "s3", &s3[..]),
                    ];
                    for (method, path, service, headers) in requests {
                        let request = Request {
                            method,
                            host,
                            path,
                            service,
                            region: "eu-west-1",
                            headers,
                            payload_hash: &hash,
                        };
                        assert_eq!(
                            sign(&request, &keys, &time),
                            sdk_authorization(&request, &keys, body, secs),
                            "{method} {path}"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 24);
    }
}
