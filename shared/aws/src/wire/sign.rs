//! Signature version 4 of a DynamoDB request: a JSON `POST` to the endpoint's path, signed over
//! its content type, host, time, target (and session token), and its body's hash.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The JSON protocol's content type.
pub(crate) const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// The keys a request is signed with.
pub(crate) struct Keys<'a> {
    pub id: &'a str,
    pub secret: &'a str,
    pub token: Option<&'a str>,
}

/// What a request is, as far as its signature goes.
pub(crate) struct Request<'a> {
    pub host: &'a str,
    pub path: &'a str,
    pub region: &'a str,
    pub target: &'a str,
    pub body: &'a [u8],
}

/// The headers a signed request carries besides its content type, host and target:
/// `x-amz-date`, `authorization` and, with temporary keys, `x-amz-security-token`.
pub(crate) struct Signed {
    pub date: String,
    pub authorization: String,
}

/// Signs `request` with `keys` at `time` (UTC, `YYYYMMDDTHHMMSSZ`).
pub(crate) fn sign(request: &Request, keys: &Keys, time: &str) -> Signed {
    let day = time.get(..8).unwrap_or(time);
    let scope = format!("{day}/{}/dynamodb/aws4_request", request.region);
    let signed_headers = if keys.token.is_some() {
        "content-type;host;x-amz-date;x-amz-security-token;x-amz-target"
    } else {
        "content-type;host;x-amz-date;x-amz-target"
    };
    let mut canonical = String::with_capacity(320);
    canonical.push_str("POST\n");
    canonical.push_str(request.path);
    canonical.push_str("\n\ncontent-type:");
    canonical.push_str(CONTENT_TYPE);
    canonical.push_str("\nhost:");
    canonical.push_str(request.host);
    canonical.push_str("\nx-amz-date:");
    canonical.push_str(time);
    if let Some(token) = keys.token {
        canonical.push_str("\nx-amz-security-token:");
        canonical.push_str(token);
    }
    canonical.push_str("\nx-amz-target:");
    canonical.push_str(request.target);
    canonical.push_str("\n\n");
    canonical.push_str(signed_headers);
    canonical.push('\n');
    canonical.push_str(&hex(&Sha256::digest(request.body)));

    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{time}\n{scope}\n{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let mut key = mac(format!("AWS4{}", keys.secret).as_bytes(), day.as_bytes());
    for part in [request.region, "dynamodb", "aws4_request"] {
        key = mac(&key, part.as_bytes());
    }
    let signature = hex(&mac(&key, to_sign.as_bytes()));
    Signed {
        date: time.to_string(),
        authorization: format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            keys.id
        ),
    }
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
        sign as sdk_sign, SignableBody, SignableRequest, SigningSettings,
    };
    use aws_sigv4::sign::v4::SigningParams;
    use std::time::{Duration, UNIX_EPOCH};

    /// The SDK's own signer's `authorization` for the same request.
    fn sdk_authorization(request: &Request, keys: &Keys, secs: u64) -> String {
        let identity = Credentials::new(
            keys.id,
            keys.secret,
            keys.token.map(str::to_string),
            None,
            "test",
        )
        .into();
        let params = SigningParams::builder()
            .identity(&identity)
            .region(request.region)
            .name("dynamodb")
            .time(UNIX_EPOCH + Duration::from_secs(secs))
            .settings(SigningSettings::default())
            .build()
            .unwrap();
        let uri = format!("https://{}{}", request.host, request.path);
        let headers = [
            ("content-type", CONTENT_TYPE),
            ("host", request.host),
            ("x-amz-target", request.target),
        ];
        let signable = SignableRequest::new(
            "POST",
            &uri,
            headers.into_iter(),
            SignableBody::Bytes(request.body),
        )
        .unwrap();
        let (instructions, _) = sdk_sign(signable, &params.into()).unwrap().into_parts();
        let (headers, _) = instructions.into_parts();
        headers
            .into_iter()
            .find(|h| h.name() == "authorization")
            .unwrap()
            .value()
            .to_string()
    }

    /// The signature is the SDK signer's, with and without a session token, for bodies and
    /// hosts of several shapes.
    #[test]
    fn signatures_are_the_sdk_signers() {
        let bodies: [&[u8]; 3] = [
            b"{}",
            br#"{"TableName":"t","Key":{"PK":{"S":"\u00e9"}}}"#,
            b"",
        ];
        let mut checked = 0;
        for (i, body) in bodies.iter().enumerate() {
            for token in [None, Some("FwoGZXIvYXdzEJr//token+/=")] {
                for host in ["dynamodb.eu-west-1.amazonaws.com", "127.0.0.1:4566"] {
                    let request = Request {
                        host,
                        path: "/",
                        region: "eu-west-1",
                        target: "DynamoDB_20120810.GetItem",
                        body,
                    };
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
                    assert_eq!(
                        sign(&request, &keys, &time).authorization,
                        sdk_authorization(&request, &keys, secs)
                    );
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 12);
    }
}
