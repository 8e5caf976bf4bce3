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
/// Notifications: under NIP-44, and the same under NIP-04 for older clients (the spec
/// asks a service that speaks both to send both).
pub const KIND_NOTIFICATION: u16 = 23197;
pub const KIND_NOTIFICATION_NIP04: u16 = 23196;

/// The largest request content Berth decrypts (an invoice is at most a few KiB).
pub const MAX_CONTENT: usize = 64 * 1024;

/// The methods Berth serves, in the order the info event lists them. Keysend and hold
/// invoices are left out: bark 0.8.0 can do neither (`NOT_IMPLEMENTED`).
/// `multi_pay_invoice` left the spec in February 2026; clients still send it.
pub const METHODS: [&str; 8] = [
    "pay_invoice",
    "multi_pay_invoice",
    "make_invoice",
    "lookup_invoice",
    "list_transactions",
    "get_balance",
    "get_info",
    "get_budget",
];

/// What a connection may be granted, in the order the info event lists it: the
/// methods, and `notifications` (the info event's word for "this connection is sent
/// [`NOTIFICATIONS`]").
pub fn grants() -> impl Iterator<Item = &'static str> {
    METHODS.into_iter().chain([NOTIFICATIONS_GRANT])
}

pub const NOTIFICATIONS_GRANT: &str = "notifications";

/// The notifications Berth sends to a connection granted them.
pub const NOTIFICATIONS: [&str; 2] = ["payment_received", "payment_sent"];

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

/// The info event of a service key: what it grants (the methods, and `notifications`
/// with a `notifications` tag naming them when it is sent them), the encryptions Berth
/// speaks.
pub fn info_event(keys: &Keys, grants: &[String]) -> Result<Event, String> {
    let content: Vec<&str> = grants.iter().map(String::as_str).collect();
    let mut tags = vec![Tag::custom(TagKind::custom("encryption"), [ENCRYPTIONS])];
    if grants.iter().any(|g| g == NOTIFICATIONS_GRANT) {
        tags.push(Tag::custom(
            TagKind::custom("notifications"),
            [NOTIFICATIONS.join(" ")],
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

/// A notification for `client` (its `p` tag), in both kinds: 23197 under NIP-44 and
/// 23196 under NIP-04.
pub fn notification_events(
    keys: &Keys,
    client: &PublicKey,
    content: &str,
) -> Result<[Event; 2], String> {
    let one = |kind: u16, encryption: Encryption| {
        let encrypted = encryption.encrypt(keys, client, content)?;
        EventBuilder::new(Kind::from(kind), encrypted)
            .tag(Tag::public_key(*client))
            .sign_with_keys(keys)
            .map_err(|e| format!("signing a notification: {e}"))
    };
    Ok([
        one(KIND_NOTIFICATION, Encryption::Nip44)?,
        one(KIND_NOTIFICATION_NIP04, Encryption::Nip04)?,
    ])
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
        let event = info_event(&keys, &methods).expect("ok");
        assert_eq!(event.kind, Kind::from(KIND_INFO));
        assert_eq!(event.content, "get_info get_balance");
        assert!(event.verify().is_ok());
        let tags: Vec<Vec<String>> = event.tags.iter().map(|t| t.clone().to_vec()).collect();
        assert!(tags.contains(&vec!["encryption".into(), ENCRYPTIONS.into()]));
        assert!(!tags.iter().any(|t| t[0] == "notifications"));
        let mut granted = methods.clone();
        granted.push(NOTIFICATIONS_GRANT.into());
        let with = info_event(&keys, &granted).expect("ok");
        assert_eq!(with.content, "get_info get_balance notifications");
        let tags: Vec<Vec<String>> = with.tags.iter().map(|t| t.clone().to_vec()).collect();
        assert!(tags.contains(&vec![
            "notifications".into(),
            "payment_received payment_sent".into()
        ]));
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
