//! NIP-47's messages as Berth reads and writes them: the request and response contents
//! (JSON, before encryption), the error codes, the encryption a request asks for, and
//! the events that carry them. The `nostr` crate does the cryptography and the event
//! format; these types are our own so that every method and field we serve (Alby's
//! `get_budget`, `multi_pay_invoice`) is written down once, here.

use nostr::nips::{nip04, nip44};
use nostr::{Event, EventBuilder, EventId, Keys, Kind, PublicKey, Tag, TagKind, Timestamp};
use serde::{Deserialize, Serialize};

/// The info event: which methods a connection may call (replaceable, one per service
/// key).
pub const KIND_INFO: u16 = 13194;
pub const KIND_REQUEST: u16 = 23194;
pub const KIND_RESPONSE: u16 = 23195;

/// The largest request content Berth decrypts (an invoice is at most a few KiB).
pub const MAX_CONTENT: usize = 64 * 1024;

/// The methods Berth serves, in the order the info event lists them. Keysend and hold
/// invoices are left out: bark 0.8.0 can do neither (`NOT_IMPLEMENTED`).
pub const METHODS: [&str; 6] = [
    "pay_invoice",
    "make_invoice",
    "lookup_invoice",
    "get_balance",
    "get_info",
    "get_budget",
];

/// How a request's content is encrypted, from its `encryption` tag (none: NIP-04).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encryption {
    Nip44,
    Nip04,
}

/// What the info event's `encryption` tag says Berth accepts, preferred first.
pub const ENCRYPTIONS: &str = "nip44_v2 nip04";

impl Encryption {
    /// The encryption a request names; `Err` with the name when it is one Berth does
    /// not speak.
    pub fn of(event: &Event) -> Result<Encryption, String> {
        let tag = event
            .tags
            .iter()
            .find(|t| t.kind() == TagKind::custom("encryption"))
            .and_then(|t| t.content().map(str::to_owned));
        match tag.as_deref() {
            None => Ok(Encryption::Nip04),
            Some(value) => {
                // A client may list several; the first Berth speaks wins.
                let mut named = value.split_whitespace();
                if named.clone().any(|e| e == "nip44_v2") {
                    Ok(Encryption::Nip44)
                } else if named.any(|e| e == "nip04") {
                    Ok(Encryption::Nip04)
                } else {
                    Err(value.to_owned())
                }
            }
        }
    }

    pub fn encrypt(self, keys: &Keys, to: &PublicKey, plain: &str) -> Result<String, String> {
        match self {
            Encryption::Nip44 => nip44::encrypt(keys.secret_key(), to, plain, nip44::Version::V2)
                .map_err(|e| format!("encrypting (NIP-44): {e}")),
            Encryption::Nip04 => nip04::encrypt(keys.secret_key(), to, plain)
                .map_err(|e| format!("encrypting (NIP-04): {e}")),
        }
    }

    pub fn decrypt(self, keys: &Keys, from: &PublicKey, content: &str) -> Result<String, String> {
        match self {
            Encryption::Nip44 => nip44::decrypt(keys.secret_key(), from, content)
                .map_err(|e| format!("not decryptable under NIP-44: {e}")),
            Encryption::Nip04 => nip04::decrypt(keys.secret_key(), from, content)
                .map_err(|e| format!("not decryptable under NIP-04: {e}")),
        }
    }
}

/// A request's content.
#[derive(Debug, Clone, Deserialize)]
pub struct Request {
    pub method: String,
    #[serde(default)]
    pub params: serde_json::Value,
}

/// The spec's error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Code {
    RateLimited,
    NotImplemented,
    InsufficientBalance,
    QuotaExceeded,
    Restricted,
    Unauthorized,
    Internal,
    UnsupportedEncryption,
    PaymentFailed,
    NotFound,
    Other,
}

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub code: Code,
    pub message: String,
}

impl Failure {
    pub fn new(code: Code, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

/// A response's content: `result` or `error`, and `result_type` always.
#[derive(Debug, Clone, Serialize)]
pub struct Response {
    pub result_type: String,
    pub error: Option<Failure>,
    pub result: Option<serde_json::Value>,
}

impl Response {
    pub fn of(method: &str, outcome: Result<serde_json::Value, Failure>) -> Response {
        match outcome {
            Ok(result) => Response {
                result_type: method.to_owned(),
                error: None,
                result: Some(result),
            },
            Err(failure) => Response {
                result_type: method.to_owned(),
                error: Some(failure),
                result: None,
            },
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a response is always JSON")
    }
}

/// The info event of a service key: the methods it grants (and `notifications` when it
/// sends them), the encryptions Berth speaks.
pub fn info_event(
    keys: &Keys,
    methods: &[String],
    notifications: &[&str],
) -> Result<Event, String> {
    let mut content: Vec<&str> = methods.iter().map(String::as_str).collect();
    let mut tags = vec![Tag::custom(TagKind::custom("encryption"), [ENCRYPTIONS])];
    if !notifications.is_empty() {
        content.push("notifications");
        tags.push(Tag::custom(
            TagKind::custom("notifications"),
            [notifications.join(" ")],
        ));
    }
    EventBuilder::new(Kind::from(KIND_INFO), content.join(" "))
        .tags(tags)
        .sign_with_keys(keys)
        .map_err(|e| format!("signing the info event: {e}"))
}

/// The response to request `request_id` from `client`, encrypted as the request was,
/// with its `e` and `p` tags (and a `d` tag for one payment of a `multi_pay_invoice`).
pub fn response_event(
    keys: &Keys,
    request_id: EventId,
    client: &PublicKey,
    encryption: Encryption,
    content: &str,
    d: Option<&str>,
) -> Result<Event, String> {
    let encrypted = encryption.encrypt(keys, client, content)?;
    let mut builder = EventBuilder::new(Kind::from(KIND_RESPONSE), encrypted)
        .tag(Tag::event(request_id))
        .tag(Tag::public_key(*client));
    if let Some(d) = d {
        builder = builder.tag(Tag::identifier(d));
    }
    builder
        .sign_with_keys(keys)
        .map_err(|e| format!("signing a response: {e}"))
}

/// When a request stops being valid: its `expiration` tag, if it has one.
pub fn expiration(event: &Event) -> Option<Timestamp> {
    event
        .tags
        .iter()
        .find(|t| t.kind() == TagKind::Expiration)
        .and_then(|t| t.content())
        .and_then(|c| c.parse::<u64>().ok())
        .map(Timestamp::from)
}

/// The service key a request is for: its (first) `p` tag.
pub fn addressed_to(event: &Event) -> Option<PublicKey> {
    event
        .tags
        .iter()
        .find(|t| t.kind() == TagKind::p())
        .and_then(|t| t.content())
        .and_then(|hex| PublicKey::from_hex(hex).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_without_an_encryption_tag_is_nip04_and_an_unknown_one_is_refused() {
        let keys = Keys::generate();
        let plain = EventBuilder::new(Kind::from(KIND_REQUEST), "x")
            .sign_with_keys(&keys)
            .expect("ok");
        assert_eq!(Encryption::of(&plain), Ok(Encryption::Nip04));
        let tagged = |v: &str| {
            EventBuilder::new(Kind::from(KIND_REQUEST), "x")
                .tag(Tag::custom(TagKind::custom("encryption"), [v]))
                .sign_with_keys(&keys)
                .expect("ok")
        };
        assert_eq!(Encryption::of(&tagged("nip44_v2")), Ok(Encryption::Nip44));
        assert_eq!(Encryption::of(&tagged("nip04")), Ok(Encryption::Nip04));
        assert_eq!(Encryption::of(&tagged("nip99")), Err("nip99".to_string()));
    }

    #[test]
    fn both_encryptions_round_trip_between_two_keys() {
        let (service, client) = (Keys::generate(), Keys::generate());
        for encryption in [Encryption::Nip44, Encryption::Nip04] {
            let sealed = encryption
                .encrypt(&client, &service.public_key(), "{\"method\":\"get_info\"}")
                .expect("ok");
            let opened = encryption
                .decrypt(&service, &client.public_key(), &sealed)
                .expect("ok");
            assert_eq!(opened, "{\"method\":\"get_info\"}");
        }
    }

    #[test]
    fn the_info_event_lists_the_methods_and_encryptions() {
        let keys = Keys::generate();
        let methods = vec!["get_info".to_string(), "get_balance".to_string()];
        let event = info_event(&keys, &methods, &[]).expect("ok");
        assert_eq!(event.kind, Kind::from(KIND_INFO));
        assert_eq!(event.content, "get_info get_balance");
        assert!(event.verify().is_ok());
        let tags: Vec<Vec<String>> = event.tags.iter().map(|t| t.clone().to_vec()).collect();
        assert!(tags.contains(&vec!["encryption".into(), ENCRYPTIONS.into()]));
        let with = info_event(&keys, &methods, &["payment_received"]).expect("ok");
        assert_eq!(with.content, "get_info get_balance notifications");
    }

    #[test]
    fn error_codes_are_the_spec_names() {
        let json = Response::of(
            "pay_invoice",
            Err(Failure::new(Code::QuotaExceeded, "over")),
        )
        .to_json();
        assert_eq!(
            json,
            r#"{"result_type":"pay_invoice","error":{"code":"QUOTA_EXCEEDED","message":"over"},"result":null}"#
        );
    }
}
