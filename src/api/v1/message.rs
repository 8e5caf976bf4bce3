//! The `message` group: sign a message with a key behind one of the wallet's Ark
//! addresses, and verify such signatures (BIP-340 Schnorr over
//! `SHA256("bark/message" || message)`, as bark defines it).

use crate::api::routes::route;
use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse};
use crate::api::routes::{Documentation, Routes};

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        // A signature by the wallet's key can authorise things elsewhere.
        .send(route!(sign_message))
        .read(route!(verify_message))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct SignMessageRequest {
    /// The message to sign.
    pub message: String,
    /// One of the wallet's Ark addresses; its key signs.
    pub address: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SignedMessage {
    /// The BIP-340 Schnorr signature, hex.
    pub signature: String,
}

fn ark_address(text: &str) -> Result<ark::Address, ApiError> {
    text.trim()
        .parse()
        .map_err(|_| ApiError::BadRequest(format!("{text:?} is not an Ark address")))
}

/// `POST /api/v1/message/sign`
#[utoipa::path(
    post,
    path = "/message/sign",
    tag = "message",
    summary = "Sign a message",
    request_body = SignMessageRequest,
    responses(
        (status = 200, description = "The signature", body = SignedMessage),
        (status = 400, description = "Malformed, or an address that is not the wallet's", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn sign_message(
    State(state): State<AppState>,
    body: Result<Json<SignMessageRequest>, JsonRejection>,
) -> Result<Json<SignedMessage>, ApiError> {
    let Json(req) = body?;
    let address = ark_address(&req.address)?;
    let signature = state
        .engine
        .ark()
        .sign_message(req.message.as_bytes(), &address)
        .await?
        .ok_or_else(|| {
            ApiError::BadRequest(format!("{} is not an address of this wallet", req.address))
        })?;
    Ok(Json(SignedMessage {
        signature: signature.to_string(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct VerifyMessageRequest {
    /// The message that was signed.
    pub message: String,
    /// The signature, hex.
    pub signature: String,
    /// The public key to check against (hex); give this or `address`.
    pub pubkey: Option<String>,
    /// The Ark address whose key to check against; give this or `pubkey`.
    pub address: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MessageVerification {
    pub valid: bool,
}

/// `POST /api/v1/message/verify`
#[utoipa::path(
    post,
    path = "/message/verify",
    tag = "message",
    summary = "Verify a signed message",
    description = "Pure cryptography: needs no wallet. Exactly one of `pubkey` and `address`.",
    request_body = VerifyMessageRequest,
    responses(
        (status = 200, description = "Whether the signature is valid", body = MessageVerification),
        (status = 400, description = "Malformed, or not exactly one of pubkey and address", body = ErrorResponse),
    )
)]
pub async fn verify_message(
    body: Result<Json<VerifyMessageRequest>, JsonRejection>,
) -> Result<Json<MessageVerification>, ApiError> {
    let Json(req) = body?;
    let signature: bitcoin::secp256k1::schnorr::Signature = req
        .signature
        .trim()
        .parse()
        .map_err(|_| ApiError::BadRequest("signature is not a hex Schnorr signature".into()))?;
    let pubkey = match (req.pubkey, req.address) {
        (Some(key), None) => key
            .trim()
            .parse::<bitcoin::secp256k1::PublicKey>()
            .map_err(|_| ApiError::BadRequest("pubkey is not a hex public key".into()))?,
        (None, Some(address)) => ark_address(&address)?.policy().user_pubkey(),
        _ => {
            return Err(ApiError::BadRequest(
                "give exactly one of pubkey and address".into(),
            ));
        }
    };
    Ok(Json(MessageVerification {
        valid: ark::message::verify(pubkey, req.message.as_bytes(), &signature),
    }))
}
