//! Standard Webhooks' signature: `v1,` and the base64 HMAC-SHA256 of
//! `<id>.<timestamp>.<body>` under the endpoint's secret.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

/// An endpoint's signing secret: `whsec_` and base64 (Standard Webhooks'
/// form), or any other text of at least 16 bytes, used as it is.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl Secret {
    /// # Errors
    /// A `whsec_` secret that is not base64, or a secret under 16 bytes.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bytes = match text.strip_prefix("whsec_") {
            Some(b64) => B64
                .decode(b64)
                .map_err(|e| format!("a whsec_ secret is base64 after the prefix: {e}"))?,
            None => text.as_bytes().to_vec(),
        };
        if bytes.len() < 16 {
            return Err("at least 16 bytes".into());
        }
        Ok(Self(bytes))
    }
}

/// The `webhook-signature` header of one attempt.
pub fn signature(secret: &Secret, id: &str, timestamp: i64, body: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret.0);
    let tag = ring::hmac::sign(&key, format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", B64.encode(tag.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification.
    #[test]
    fn signs_as_the_specification_does() {
        let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        assert!(Secret::parse("short").is_err());
        assert!(Secret::parse("whsec_!!").is_err());
    }
}
