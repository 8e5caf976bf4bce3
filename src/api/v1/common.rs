//! Response types shared by several groups (VTXOs, transactions, pending boards).

use bitcoin::Transaction;
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::error::ApiError;

/// Berth extension: the response header of the wallet reads (balance, VTXOs, history,
/// exits) that says how current they are: `current` while the wallet is open,
/// `possibly-stale` while bark cannot open it (its chain source unreachable) and the
/// answer is what the wallet database held when it was last open.
pub const FRESHNESS: &str = "berth-freshness";

/// A wallet read and its freshness, sent as the [`FRESHNESS`] header.
pub struct Fresh<T>(pub crate::engine::Freshness, pub T);

impl<T: axum::response::IntoResponse> axum::response::IntoResponse for Fresh<T> {
    fn into_response(self) -> axum::response::Response {
        let value = match self.0 {
            crate::engine::Freshness::Current => "current",
            crate::engine::Freshness::PossiblyStale => "possibly-stale",
        };
        let mut response = self.1.into_response();
        response
            .headers_mut()
            .insert(FRESHNESS, axum::http::HeaderValue::from_static(value));
        response
    }
}

/// A VTXO id as clients write it (`txid:vout`); 400 otherwise.
pub fn parse_vtxo_id(id: &str) -> Result<ark::VtxoId, ApiError> {
    id.trim()
        .parse()
        .map_err(|_| ApiError::BadRequest(format!("{id:?} is not a VTXO id (txid:vout)")))
}

/// All the bitcoin there will ever be, in sats: no amount can be larger.
pub const MAX_SATS: u64 = 21_000_000 * 100_000_000;

/// An amount `field` names: above zero and at most 21 million BTC; 400 otherwise.
pub fn amount(field: &str, sats: u64) -> Result<bitcoin::Amount, ApiError> {
    if sats == 0 {
        return Err(ApiError::BadRequest(format!("{field} must be above zero")));
    }
    if sats > MAX_SATS {
        return Err(ApiError::BadRequest(format!(
            "{field} is more than 21 million bitcoin"
        )));
    }
    Ok(bitcoin::Amount::from_sat(sats))
}

/// Berth extension on list endpoints: pages. Without `limit` the whole list comes
/// back, as barkd sends it; with it, at most `limit` items and, when more follow, a
/// `Next-Cursor` response header to pass as `cursor` for the next page.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Berth extension: at most this many items (1 to 1,000).
    pub limit: Option<u32>,
    /// Berth extension: continue after the item this names (the previous page's
    /// `Next-Cursor` response header).
    pub cursor: Option<String>,
}

/// Most items a page may ask for.
pub const MAX_PAGE: u32 = 1000;

/// The response header that names the next page.
pub const NEXT_CURSOR: &str = "next-cursor";

impl PageQuery {
    /// The page size asked for, checked; `None` for the whole list.
    pub fn limit(&self) -> Result<Option<usize>, ApiError> {
        match self.limit {
            None if self.cursor.is_some() => Ok(Some(MAX_PAGE as usize)),
            None => Ok(None),
            Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(Some(n as usize)),
            Some(_) => Err(ApiError::BadRequest(format!(
                "limit must be 1 to {MAX_PAGE}"
            ))),
        }
    }

    /// Cut `items` (in their list order) to the page asked for; `key` is what a cursor
    /// names an item by.
    pub fn apply<T>(&self, items: Vec<T>, key: impl Fn(&T) -> String) -> Result<Page<T>, ApiError> {
        let Some(limit) = self.limit()? else {
            return Ok(Page { items, next: None });
        };
        let start = match &self.cursor {
            None => 0,
            Some(cursor) => {
                items
                    .iter()
                    .position(|item| key(item) == *cursor)
                    .ok_or_else(|| {
                        ApiError::BadRequest(
                            "cursor: no such item in the list (it may have gone)".into(),
                        )
                    })?
                    + 1
            }
        };
        let more = items.len() > start + limit;
        let items: Vec<T> = items.into_iter().skip(start).take(limit).collect();
        let next = if more { items.last().map(&key) } else { None };
        Ok(Page { items, next })
    }
}

/// One page of a list, and the cursor of the next one if there is more.
#[derive(Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

impl<T: Serialize> Page<T> {
    /// The page as it is sent: its items as a JSON array, the next cursor apart (a
    /// header). Rendered once, it can be kept and sent again (`page_cache`).
    pub fn render(&self) -> Result<RenderedPage, ApiError> {
        let body = serde_json::to_vec(&self.items)
            .map_err(|e| ApiError::internal("rendering a list", e))?;
        Ok(RenderedPage {
            body: body.into(),
            next: self.next.clone(),
        })
    }
}

impl<T: Serialize> axum::response::IntoResponse for Page<T> {
    fn into_response(self) -> axum::response::Response {
        match self.render() {
            Ok(page) => page.into_response(),
            Err(e) => e.into_response(),
        }
    }
}

/// A page rendered: the JSON body and the next page's cursor.
#[derive(Clone)]
pub struct RenderedPage {
    pub body: axum::body::Bytes,
    pub next: Option<String>,
}

impl axum::response::IntoResponse for RenderedPage {
    fn into_response(self) -> axum::response::Response {
        let mut response = (
            [(
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static("application/json"),
            )],
            self.body,
        )
            .into_response();
        if let Some(next) = self.next
            && let Ok(value) = axum::http::HeaderValue::from_str(&next)
        {
            response.headers_mut().insert(NEXT_CURSOR, value);
        }
        response
    }
}

/// [`parse_vtxo_id`] for each.
pub fn parse_vtxo_ids(ids: &[String]) -> Result<Vec<ark::VtxoId>, ApiError> {
    ids.iter().map(|id| parse_vtxo_id(id)).collect()
}

/// A transaction: its id and its consensus encoding, hex.
#[derive(Debug, Serialize, ToSchema)]
pub struct TransactionInfo {
    pub txid: String,
    /// The transaction, consensus-encoded, hex.
    pub tx: String,
}

impl From<&Transaction> for TransactionInfo {
    fn from(tx: &Transaction) -> Self {
        TransactionInfo {
            txid: tx.compute_txid().to_string(),
            tx: bitcoin::consensus::encode::serialize_hex(tx),
        }
    }
}

/// Where a VTXO stands in the wallet.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum VtxoStateInfo {
    /// Can be spent now.
    Spendable,
    /// Spent.
    Spent,
    /// Moved on-chain by a unilateral exit; no longer usable in Ark.
    Exited,
    /// Held by an operation in progress (a round, a payment, a board).
    Locked {
        /// The movement that holds it, if a movement does.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(nullable = false)]
        movement_id: Option<u32>,
        /// The wallet action that holds it, if an action does.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(nullable = false)]
        action_id: Option<String>,
    },
}

impl From<&bark::vtxo::VtxoState> for VtxoStateInfo {
    fn from(state: &bark::vtxo::VtxoState) -> Self {
        use bark::vtxo::{VtxoLockHolder, VtxoState};
        match state {
            VtxoState::Spendable => VtxoStateInfo::Spendable,
            VtxoState::Spent => VtxoStateInfo::Spent,
            VtxoState::Exited => VtxoStateInfo::Exited,
            VtxoState::Locked { holder } => VtxoStateInfo::Locked {
                movement_id: match holder {
                    Some(VtxoLockHolder::Movement { id }) => Some(id.0),
                    _ => None,
                },
                action_id: match holder {
                    Some(VtxoLockHolder::Action { id }) => Some(id.clone()),
                    _ => None,
                },
            },
        }
    }
}

/// A VTXO of the wallet, with its state.
#[derive(Debug, Serialize, ToSchema)]
pub struct WalletVtxoInfo {
    /// `txid:vout`.
    pub id: String,
    pub amount_sat: u64,
    /// The VTXO's spending policy, e.g. `pubkey`.
    pub policy_type: String,
    pub user_pubkey: String,
    pub server_pubkey: String,
    /// The height after which the server can sweep it: refresh it before then.
    pub expiry_height: u32,
    /// Blocks between the last exit transaction and the on-chain claim.
    pub exit_delta: u16,
    /// The on-chain outpoint (`txid:vout`) the VTXO is rooted in.
    pub chain_anchor: String,
    /// How many off-chain transactions a unilateral exit must confirm.
    pub exit_depth: Option<u16>,
    pub state: VtxoStateInfo,
}

impl From<&bark::WalletVtxo> for WalletVtxoInfo {
    fn from(v: &bark::WalletVtxo) -> Self {
        WalletVtxoInfo {
            id: v.vtxo.id().to_string(),
            amount_sat: v.vtxo.amount().to_sat(),
            policy_type: v.vtxo.policy_type().to_string(),
            user_pubkey: v.vtxo.user_pubkey().to_string(),
            server_pubkey: v.vtxo.server_pubkey().to_string(),
            expiry_height: v.vtxo.expiry_height().to_u32(),
            exit_delta: v.vtxo.exit_delta().to_u16(),
            chain_anchor: v.vtxo.chain_anchor().to_string(),
            exit_depth: Some(v.exit_depth),
            state: VtxoStateInfo::from(&v.state),
        }
    }
}

/// A board waiting for its funding transaction to confirm.
#[derive(Debug, Serialize, ToSchema)]
pub struct PendingBoardInfo {
    /// The funding transaction that must confirm (as bark keeps it: unsigned; the
    /// txid is final).
    pub funding_tx: TransactionInfo,
    /// The VTXOs the board creates (one).
    pub vtxos: Vec<String>,
    /// The VTXO's value, after the server's board fee.
    pub amount_sat: u64,
    /// The movement that records the board in the history.
    pub movement_id: u32,
}

impl From<&bark::persist::models::PendingBoard> for PendingBoardInfo {
    fn from(board: &bark::persist::models::PendingBoard) -> Self {
        PendingBoardInfo {
            funding_tx: TransactionInfo::from(&board.funding_tx),
            vtxos: board.vtxos.iter().map(ToString::to_string).collect(),
            amount_sat: board.amount.to_sat(),
            movement_id: board.movement_id.0,
        }
    }
}

/// What kind of payment method (barkd's spellings).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PaymentMethodType {
    Ark,
    Bitcoin,
    OutputScript,
    Invoice,
    Offer,
    LightningAddress,
    Lnurl,
    Custom,
}

/// An address, invoice or other identifier of a payer or payee.
#[derive(Debug, Serialize, ToSchema)]
pub struct PaymentMethod {
    #[serde(rename = "type")]
    pub kind: PaymentMethodType,
    /// The address, invoice, script (hex) or other value.
    pub value: String,
}

impl From<&bark::movement::PaymentMethod> for PaymentMethod {
    fn from(pm: &bark::movement::PaymentMethod) -> Self {
        let kind = match pm.type_str() {
            "ark" => PaymentMethodType::Ark,
            "bitcoin" => PaymentMethodType::Bitcoin,
            "output-script" => PaymentMethodType::OutputScript,
            "invoice" => PaymentMethodType::Invoice,
            "offer" => PaymentMethodType::Offer,
            "lightning-address" => PaymentMethodType::LightningAddress,
            "lnurl" => PaymentMethodType::Lnurl,
            _ => PaymentMethodType::Custom,
        };
        PaymentMethod {
            kind,
            value: pm.value_string(),
        }
    }
}

/// A payee or payer of a movement and the amount.
#[derive(Debug, Serialize, ToSchema)]
pub struct MovementDestination {
    pub destination: PaymentMethod,
    pub amount_sat: u64,
}

impl From<&bark::movement::MovementDestination> for MovementDestination {
    fn from(d: &bark::movement::MovementDestination) -> Self {
        MovementDestination {
            destination: PaymentMethod::from(&d.destination),
            amount_sat: d.amount.to_sat(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MovementStatus {
    Pending,
    Successful,
    Failed,
    Canceled,
}

/// Which part of the wallet made the movement, and why.
#[derive(Debug, Serialize, ToSchema)]
pub struct MovementSubsystem {
    /// E.g. `bark.board`, `bark.arkoor`, `bark.round`.
    pub name: String,
    /// E.g. `board`, `send`, `receive`, `refresh`.
    pub kind: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MovementTimestamp {
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
    /// When it reached a final status; absent while pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub completed_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// One entry of the wallet's history: funds moving in, out or within the wallet.
#[derive(Debug, Serialize, ToSchema)]
pub struct Movement {
    pub id: u32,
    pub status: MovementStatus,
    pub subsystem: MovementSubsystem,
    /// The expected change of the balance (often before fees), sats, signed.
    pub intended_balance_sat: i64,
    /// The actual change of the balance, fees included, sats, signed.
    pub effective_balance_sat: i64,
    /// Off-chain fees paid; on-chain fees, if any, are in `metadata`.
    pub offchain_fee_sat: u64,
    pub sent_to: Vec<MovementDestination>,
    pub received_on: Vec<MovementDestination>,
    pub input_vtxos: Vec<String>,
    pub output_vtxos: Vec<String>,
    pub exited_vtxos: Vec<String>,
    pub time: MovementTimestamp,
    /// The subsystem's details and the client's own annotations; absent when empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

impl From<&bark::movement::Movement> for Movement {
    fn from(m: &bark::movement::Movement) -> Self {
        use bark::movement::MovementStatus as S;
        let ids = |ids: &[ark::VtxoId]| ids.iter().map(ToString::to_string).collect();
        Movement {
            id: m.id.0,
            status: match m.status {
                S::Pending => MovementStatus::Pending,
                S::Successful => MovementStatus::Successful,
                S::Failed => MovementStatus::Failed,
                S::Canceled => MovementStatus::Canceled,
            },
            subsystem: MovementSubsystem {
                name: m.subsystem.name.clone(),
                kind: m.subsystem.kind.clone(),
            },
            intended_balance_sat: m.intended_balance.to_sat(),
            effective_balance_sat: m.effective_balance.to_sat(),
            offchain_fee_sat: m.offchain_fee.to_sat(),
            sent_to: m.sent_to.iter().map(MovementDestination::from).collect(),
            received_on: m
                .received_on
                .iter()
                .map(MovementDestination::from)
                .collect(),
            input_vtxos: ids(&m.input_vtxos),
            output_vtxos: ids(&m.output_vtxos),
            exited_vtxos: ids(&m.exited_vtxos),
            time: MovementTimestamp {
                created_at: m.time.created_at.into(),
                updated_at: m.time.updated_at.into(),
                completed_at: m.time.completed_at.map(Into::into),
            },
            metadata: (!m.metadata.is_empty()).then(|| m.metadata.clone()),
        }
    }
}

/// The device whose own payments are all `caller` may see of the history (its rules
/// say `history: own`); `None`: it sees all of it.
pub async fn history_viewer(
    state: &crate::api::AppState,
    caller: &crate::access::Caller,
) -> Result<Option<String>, ApiError> {
    match &caller.credential {
        crate::access::Credential::Admin => Ok(None),
        crate::access::Credential::Device(id) => Ok(state
            .engine
            .spending()
            .own_history(id)
            .await?
            .then(|| id.clone())),
    }
}

/// The egress policy's client, on the share of the credential named `key`
/// (`access::Credential::key`).
pub fn outbound<'a>(
    state: &'a crate::api::AppState,
    key: &'a str,
) -> crate::engine::lnurl::Outbound<'a> {
    crate::engine::lnurl::Outbound {
        egress: &state.egress,
        caller: key,
    }
}
