//! Signatures by the Standard Webhooks specification (standardwebhooks.com), so that a
//! receiver verifies with an existing library in any language: a secret `whsec_` +
//! base64 of its key; the signed content `{webhook-id}.{webhook-timestamp}.{body}`;
//! the signature `v1,` + base64 of its HMAC-SHA256; several signatures, space
//! separated, while a rotated secret is still honoured.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use sha2::Sha256;

const PREFIX: &str = "whsec_";
/// Bytes of a new secret's key (the specification asks for 24 to 64).
const KEY_BYTES: usize = 32;

/// A new random secret, as shown to the owner and stored.
pub fn new_secret() -> String {
    let mut key = [0u8; KEY_BYTES];
    getrandom::fill(&mut key).expect("the OS random source is available");
    format!("{PREFIX}{}", BASE64.encode(key))
}

/// The key of a stored secret (`None`: not one of ours, which cannot happen for a
/// secret this module made).
fn key(secret: &str) -> Option<Vec<u8>> {
    BASE64.decode(secret.strip_prefix(PREFIX)?).ok()
}

/// The `webhook-signature` header's value: one `v1,` signature per secret.
pub fn signature(secrets: &[&str], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .filter_map(|secret| key(secret))
        .map(|key| {
            let mut mac =
                Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes a key of any length");
            mac.update(id.as_bytes());
            mac.update(b".");
            mac.update(timestamp.to_string().as_bytes());
            mac.update(b".");
            mac.update(body);
            format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The specification's own example (its reference libraries test the same): this
    /// secret, id, timestamp and body sign to this value.
    #[test]
    fn the_specifications_example_signs_the_same() {
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            signature(
                &["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                body
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_new_secret_is_one_of_ours_and_two_sign_twice() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert_eq!(key(&a).map(|k| k.len()), Some(KEY_BYTES));
        let both = signature(&[&a, &b], "msg_1", 1, b"{}");
        assert_eq!(both.split(' ').count(), 2);
        assert!(both.split(' ').all(|s| s.starts_with("v1,")));
    }
}
