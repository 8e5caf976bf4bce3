//! Creating the wallet from the console: a new seed shown once and confirmed before
//! the wallet exists, or a phrase imported. Both go through the checks the API's create
//! uses (`engine::CreateParts::check`).

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::routes::Signed;
use super::{Frame, page, see_other};
use crate::api::AppState;

/// Wallets being created, waiting for their phrase to be confirmed: a few, briefly.
pub const NEW_WALLETS: crate::access::expiring::Policy = crate::access::expiring::Policy {
    ttl: std::time::Duration::from_secs(15 * 60),
    capacity: 16,
    expiry: crate::access::expiring::Expiry::FromInsert,
    when_full: crate::access::expiring::WhenFull::EvictOldest,
};

#[derive(Template)]
#[template(path = "wallet_new.html")]
struct WalletNewPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "wallet_confirm.html")]
struct WalletConfirmPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    words: Vec<String>,
    first: usize,
    second: usize,
    error: Option<String>,
}

/// Where a new or imported wallet connects, as the form gives it.
#[derive(Deserialize)]
pub(super) struct WalletForm {
    network: String,
    ark_server: String,
    chain: String,
    #[serde(default)]
    esplora_url: String,
    #[serde(default)]
    bitcoind_url: String,
    #[serde(default)]
    bitcoind_cookie: String,
    #[serde(default)]
    bitcoind_user: String,
    #[serde(default)]
    bitcoind_pass: String,
    force: Option<String>,
    #[serde(default)]
    seed_passphrase: String,
    #[serde(default)]
    seed_passphrase_again: String,
    /// Import only.
    phrase: Option<String>,
    birthday_height: Option<String>,
}

impl WalletForm {
    /// The engine's create request for this form, checked by the same rules as the
    /// API's (`engine::CreateParts::check`): typed, so a renamed part breaks the build,
    /// not the form.
    fn request(&self) -> Result<crate::engine::CreateWallet, String> {
        use crate::engine::{BitcoindAuth, ChainSource, CreateParts};
        let network = match self.network.as_str() {
            "mainnet" => bitcoin::Network::Bitcoin,
            // Mutinynet is a signet, as the API takes it.
            "signet" | "mutinynet" => bitcoin::Network::Signet,
            "regtest" => bitcoin::Network::Regtest,
            _ => return Err("Choose a network.".into()),
        };
        let chain = match self.chain.as_str() {
            "esplora" => ChainSource::Esplora {
                url: self.esplora_url.trim().to_owned(),
            },
            "bitcoind" => ChainSource::Bitcoind {
                url: self.bitcoind_url.trim().to_owned(),
                auth: if self.bitcoind_cookie.trim().is_empty() {
                    BitcoindAuth::UserPass {
                        user: self.bitcoind_user.clone(),
                        pass: self.bitcoind_pass.clone(),
                    }
                } else {
                    BitcoindAuth::Cookie(self.bitcoind_cookie.trim().into())
                },
            },
            _ => return Err("Choose Esplora or bitcoind.".into()),
        };
        let birthday_height = match self.birthday_height.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(h) => Some(
                h.parse::<u32>()
                    .map_err(|_| "The birthday height is a block height.")?,
            ),
        };
        if self.seed_passphrase != self.seed_passphrase_again {
            return Err("The two passphrases differ.".into());
        }
        CreateParts {
            network: Some(network),
            mnemonic: self.phrase.as_deref().map(|p| p.trim().to_owned()),
            birthday_height,
            ark_server: Some(self.ark_server.trim().to_owned()),
            chain: Some(chain),
            force: self.force.is_some(),
            seed_passphrase: (!self.seed_passphrase.is_empty())
                .then(|| self.seed_passphrase.clone()),
        }
        .check()
        .map_err(|refused| refused.to_string())
    }
}

/// The two words of a phrase its owner types back: fixed by the phrase, different.
fn check_positions(words: &[String]) -> (usize, usize) {
    use bitcoin::hashes::{Hash as _, sha256};
    let digest = sha256::Hash::hash(words.join(" ").as_bytes()).to_byte_array();
    let n = words.len().max(2);
    let first = usize::from(digest[0]) % n;
    let second = (first + 1 + usize::from(digest[1]) % (n - 1)) % n;
    (first.min(second), first.max(second))
}

fn wallet_new_page(state: &AppState, status: StatusCode, error: Option<String>) -> Response {
    let frame = Frame::new(state);
    page(
        status,
        &WalletNewPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            error,
        },
    )
}

fn confirm_page(
    state: &AppState,
    create: &crate::engine::CreateWallet,
    error: Option<String>,
) -> Response {
    let words: Vec<String> = create
        .new_seed
        .as_ref()
        .map(|m| m.words().map(String::from).collect())
        .unwrap_or_default();
    let (first, second) = check_positions(&words);
    let frame = Frame::new(state);
    page(
        if error.is_some() {
            StatusCode::UNPROCESSABLE_ENTITY
        } else {
            StatusCode::OK
        },
        &WalletConfirmPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            words,
            first,
            second,
            error,
        },
    )
}

/// Whether the box has a wallet already (then the wallet pages send to the overview).
async fn has_wallet(state: &AppState) -> bool {
    !matches!(state.engine.wallet_record().await, Ok(None))
}

/// `GET /console/wallet` (admin): create or import.
pub(super) async fn wallet_form(State(state): State<AppState>) -> Response {
    if has_wallet(&state).await {
        return see_other("/", None);
    }
    wallet_new_page(&state, StatusCode::OK, None)
}

/// `POST /console/wallet/new`: a new seed, shown once, kept until it is confirmed.
pub(super) async fn new_wallet(
    State(state): State<AppState>,
    Signed(who): Signed,
    form: Result<Form<WalletForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return wallet_new_page(
            &state,
            StatusCode::BAD_REQUEST,
            Some("The form is incomplete.".into()),
        );
    };
    let mut create = match form.request() {
        Ok(create) => create,
        Err(message) => return wallet_new_page(&state, StatusCode::BAD_REQUEST, Some(message)),
    };
    create.new_seed = match crate::engine::new_mnemonic() {
        Ok(seed) => Some(seed),
        Err(e) => {
            tracing::error!(target: "berth::console", error = %e, "no new seed");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let response = confirm_page(&state, &create, None);
    let mut pending = state.new_wallets.lock().unwrap_or_else(|e| e.into_inner());
    // Evicts the oldest when full: a page left open elsewhere only has to start again.
    let _ = pending.insert(who.device_id, create, std::time::Instant::now());
    response
}

#[derive(Deserialize)]
pub(super) struct ConfirmForm {
    first: String,
    second: String,
}

/// `POST /console/wallet/confirm`: the two words right, the wallet is created with the
/// seed that was shown.
pub(super) async fn confirm_wallet(
    State(state): State<AppState>,
    Signed(who): Signed,
    form: Result<Form<ConfirmForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return (StatusCode::BAD_REQUEST, "a malformed form").into_response();
    };
    let now = std::time::Instant::now();
    let Some(create) = state
        .new_wallets
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take(&who.device_id, now)
    else {
        return wallet_new_page(
            &state,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("That phrase is no longer waiting (15 minutes passed, or it was used): start again.".into()),
        );
    };
    let words: Vec<String> = create
        .new_seed
        .as_ref()
        .map(|m| m.words().map(String::from).collect())
        .unwrap_or_default();
    let (first, second) = check_positions(&words);
    let right = |typed: &str, at: usize| words.get(at).is_some_and(|w| w == typed.trim());
    if !right(&form.first, first) || !right(&form.second, second) {
        let response = confirm_page(
            &state,
            &create,
            Some("Those words do not match: check what you wrote down.".into()),
        );
        let mut pending = state.new_wallets.lock().unwrap_or_else(|e| e.into_inner());
        let _ = pending.insert(who.device_id, create, now);
        return response;
    }
    create_wallet(&state, create).await
}

/// `POST /console/wallet/import`
pub(super) async fn import_wallet(
    State(state): State<AppState>,
    form: Result<Form<WalletForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return wallet_new_page(
            &state,
            StatusCode::BAD_REQUEST,
            Some("The form is incomplete.".into()),
        );
    };
    match form.request() {
        Ok(create) if create.mnemonic.is_some() => create_wallet(&state, create).await,
        Ok(_) => wallet_new_page(
            &state,
            StatusCode::BAD_REQUEST,
            Some("Give the recovery phrase.".into()),
        ),
        Err(message) => wallet_new_page(&state, StatusCode::BAD_REQUEST, Some(message)),
    }
}

async fn create_wallet(state: &AppState, create: crate::engine::CreateWallet) -> Response {
    match state.engine.create(create).await {
        Ok(fingerprint) => {
            tracing::info!(target: "berth::console", %fingerprint, "wallet created from the console");
            see_other("/", None)
        }
        Err(e) => {
            let e = crate::api::error::ApiError::from(e);
            wallet_new_page(
                state,
                e.status(),
                Some(format!("The wallet was not created: {e}")),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(network: &str, chain: &str) -> WalletForm {
        WalletForm {
            network: network.into(),
            ark_server: " https://ark.example ".into(),
            chain: chain.into(),
            esplora_url: "https://esplora.example/api".into(),
            bitcoind_url: "http://127.0.0.1:18443".into(),
            bitcoind_cookie: String::new(),
            bitcoind_user: "berth".into(),
            bitcoind_pass: "secret".into(),
            force: Some("on".into()),
            seed_passphrase: String::new(),
            seed_passphrase_again: String::new(),
            phrase: None,
            birthday_height: Some("  ".into()),
        }
    }

    /// The console's form becomes the engine's request through the API's own checks:
    /// each network and chain source it offers, and its own refusals in words.
    #[test]
    fn the_form_becomes_the_request_the_api_would_make() {
        let made = form("regtest", "bitcoind").request().expect("valid");
        assert_eq!(made.network, bitcoin::Network::Regtest);
        assert!(made.force && made.mnemonic.is_none() && made.birthday_height.is_none());
        match made.config {
            crate::engine::WalletConfig::New {
                ark_server,
                chain: crate::engine::ChainSource::Bitcoind { url, auth },
            } => {
                assert_eq!(ark_server, "https://ark.example");
                assert_eq!(url, "http://127.0.0.1:18443");
                assert!(matches!(auth, crate::engine::BitcoindAuth::UserPass { .. }));
            }
            other => panic!("not a bitcoind config: {other:?}"),
        }
        let made = form("mutinynet", "esplora").request().expect("valid");
        assert_eq!(made.network, bitcoin::Network::Signet);
        assert!(matches!(
            made.config,
            crate::engine::WalletConfig::New {
                chain: crate::engine::ChainSource::Esplora { .. },
                ..
            }
        ));

        assert_eq!(
            form("testnet", "esplora").request().err().as_deref(),
            Some("Choose a network.")
        );
        assert_eq!(
            form("regtest", "electrum").request().err().as_deref(),
            Some("Choose Esplora or bitcoind.")
        );
        let mut differ = form("regtest", "esplora");
        differ.seed_passphrase = "correct horse".into();
        differ.seed_passphrase_again = "correct hors".into();
        assert_eq!(
            differ.request().err().as_deref(),
            Some("The two passphrases differ.")
        );
        let mut short = form("regtest", "esplora");
        short.seed_passphrase = "short".into();
        short.seed_passphrase_again = "short".into();
        assert!(short.request().expect_err("refused").contains("at least 8"));
        let mut bad_phrase = form("regtest", "esplora");
        bad_phrase.phrase = Some("not a phrase".into());
        assert!(
            bad_phrase
                .request()
                .expect_err("refused")
                .contains("BIP-39")
        );
    }
}
