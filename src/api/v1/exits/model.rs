//! What the exits group answers with: an exit's state, its transactions and their
//! status, and its error, in barkd's shapes, with the conversions from bark's types.

use serde::Serialize;
use utoipa::ToSchema;

use crate::api::v1::common::TransactionInfo;

/// A block: its height and hash.
#[derive(Debug, Serialize, ToSchema)]
pub struct BlockRef {
    pub height: u32,
    pub hash: String,
}

impl From<&bitcoin_ext::BlockRef> for BlockRef {
    fn from(block: &bitcoin_ext::BlockRef) -> Self {
        BlockRef {
            height: block.height.to_u32(),
            hash: block.hash.to_string(),
        }
    }
}

/// Where the child (fee-paying) transaction of an exit transaction came from.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ExitTxOrigin {
    /// Made and broadcast by this wallet.
    Wallet {
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(nullable = false)]
        confirmed_in: Option<BlockRef>,
    },
    /// Found in the mempool.
    Mempool,
    /// Found in a block.
    Block { confirmed_in: BlockRef },
}

impl From<&bark::exit::ExitTxOrigin> for ExitTxOrigin {
    fn from(origin: &bark::exit::ExitTxOrigin) -> Self {
        use bark::exit::ExitTxOrigin as O;
        match origin {
            O::Wallet { confirmed_in } => ExitTxOrigin::Wallet {
                confirmed_in: confirmed_in.as_ref().map(BlockRef::from),
            },
            O::Mempool => ExitTxOrigin::Mempool,
            O::Block { confirmed_in } => ExitTxOrigin::Block {
                confirmed_in: confirmed_in.into(),
            },
        }
    }
}

/// Where one exit transaction stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ExitTxStatus {
    VerifyInputs,
    AwaitingInputConfirmation {
        txids: Vec<String>,
    },
    AwaitingCpfpBroadcast,
    AwaitingConfirmation {
        child_txid: String,
        origin: ExitTxOrigin,
    },
    Confirmed {
        child_txid: String,
        block: BlockRef,
        origin: ExitTxOrigin,
    },
}

impl From<&bark::exit::ExitTxStatus> for ExitTxStatus {
    fn from(status: &bark::exit::ExitTxStatus) -> Self {
        use bark::exit::ExitTxStatus as S;
        match status {
            S::VerifyInputs => ExitTxStatus::VerifyInputs,
            S::AwaitingInputConfirmation { txids } => {
                let mut txids: Vec<String> = txids.iter().map(ToString::to_string).collect();
                txids.sort();
                ExitTxStatus::AwaitingInputConfirmation { txids }
            }
            S::AwaitingCpfpBroadcast => ExitTxStatus::AwaitingCpfpBroadcast,
            S::AwaitingConfirmation { child_txid, origin } => ExitTxStatus::AwaitingConfirmation {
                child_txid: child_txid.to_string(),
                origin: origin.into(),
            },
            S::Confirmed {
                child_txid,
                block,
                origin,
            } => ExitTxStatus::Confirmed {
                child_txid: child_txid.to_string(),
                block: block.into(),
                origin: origin.into(),
            },
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ExitTx {
    pub txid: String,
    pub status: ExitTxStatus,
}

/// The phase of an exit. Every phase carries the tip height it was recorded at.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ExitState {
    /// Started; nothing broadcast yet.
    Start { tip_height: u32 },
    /// Its transactions are being broadcast and confirmed.
    Processing {
        tip_height: u32,
        transactions: Vec<ExitTx>,
    },
    /// Confirmed; waiting for the exit delta before it can be claimed.
    AwaitingDelta {
        tip_height: u32,
        confirmed_block: BlockRef,
        claimable_height: u32,
    },
    /// Can be claimed (`POST /exits/claim/*`).
    Claimable {
        tip_height: u32,
        claimable_since: BlockRef,
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(nullable = false)]
        last_scanned_block: Option<BlockRef>,
    },
    /// A claim transaction is out.
    ClaimInProgress {
        tip_height: u32,
        claimable_since: BlockRef,
        claim_txid: String,
    },
    /// Claimed and confirmed.
    Claimed {
        tip_height: u32,
        txid: String,
        block: BlockRef,
    },
    /// The VTXO was spent before its exit got on-chain.
    VtxoAlreadySpent { tip_height: u32 },
    /// Berth (bark 0.8): the server swept the VTXO's inputs; it can no longer exit.
    VtxoSwept {
        tip_height: u32,
        spent_inputs: Vec<String>,
    },
    /// Canceled before anything reached the chain.
    Canceled { tip_height: u32 },
}

impl From<&bark::exit::ExitState> for ExitState {
    fn from(state: &bark::exit::ExitState) -> Self {
        use bark::exit::ExitState as S;
        match state {
            S::Start(s) => ExitState::Start {
                tip_height: s.tip_height.to_u32(),
            },
            S::Processing(s) => ExitState::Processing {
                tip_height: s.tip_height.to_u32(),
                transactions: s
                    .transactions
                    .iter()
                    .map(|tx| ExitTx {
                        txid: tx.txid.to_string(),
                        status: (&tx.status).into(),
                    })
                    .collect(),
            },
            S::AwaitingDelta(s) => ExitState::AwaitingDelta {
                tip_height: s.tip_height.to_u32(),
                confirmed_block: (&s.confirmed_block).into(),
                claimable_height: s.claimable_height.to_u32(),
            },
            S::Claimable(s) => ExitState::Claimable {
                tip_height: s.tip_height.to_u32(),
                claimable_since: (&s.claimable_since).into(),
                last_scanned_block: s.last_scanned_block.as_ref().map(BlockRef::from),
            },
            S::ClaimInProgress(s) => ExitState::ClaimInProgress {
                tip_height: s.tip_height.to_u32(),
                claimable_since: (&s.claimable_since).into(),
                claim_txid: s.claim_txid.to_string(),
            },
            S::Claimed(s) => ExitState::Claimed {
                tip_height: s.tip_height.to_u32(),
                txid: s.txid.to_string(),
                block: (&s.block).into(),
            },
            S::VtxoAlreadySpent(s) => ExitState::VtxoAlreadySpent {
                tip_height: s.tip_height.to_u32(),
            },
            S::VtxoSwept(s) => ExitState::VtxoSwept {
                tip_height: s.tip_height.to_u32(),
                spent_inputs: s.spent_inputs.iter().map(ToString::to_string).collect(),
            },
            S::Canceled(s) => ExitState::Canceled {
                tip_height: s.tip_height.to_u32(),
            },
        }
    }
}

/// The exit phases (barkd's `ExitStateKind`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ExitStateKind {
    Start,
    Processing,
    AwaitingDelta,
    Claimable,
    ClaimInProgress,
    Claimed,
    VtxoAlreadySpent,
    VtxoSwept,
    Canceled,
}

impl From<bark::exit::ExitStateKind> for ExitStateKind {
    fn from(kind: bark::exit::ExitStateKind) -> Self {
        use bark::exit::ExitStateKind as K;
        match kind {
            K::Start => ExitStateKind::Start,
            K::Processing => ExitStateKind::Processing,
            K::AwaitingDelta => ExitStateKind::AwaitingDelta,
            K::Claimable => ExitStateKind::Claimable,
            K::ClaimInProgress => ExitStateKind::ClaimInProgress,
            K::Claimed => ExitStateKind::Claimed,
            K::VtxoAlreadySpent => ExitStateKind::VtxoAlreadySpent,
            K::VtxoSwept => ExitStateKind::VtxoSwept,
            K::Canceled => ExitStateKind::Canceled,
        }
    }
}

/// What went wrong with one exit (amounts in sats, heights as numbers).
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ExitError {
    AncestorRetrievalFailure {
        txid: String,
        error: String,
    },
    BlockRetrievalFailure {
        height: u32,
        error: String,
    },
    CannotCancelExit {
        vtxo: String,
        state: ExitStateKind,
    },
    ClaimMissingInputs,
    ClaimFeeExceedsOutput {
        needed: u64,
        output: u64,
    },
    ClaimMissingSignableClause {
        vtxo: String,
    },
    ClaimSigningError {
        error: String,
    },
    CyclicExitTransactions {
        vtxo: String,
    },
    DatabaseVtxoStoreFailure {
        vtxo_id: String,
        error: String,
    },
    DatabaseChildRetrievalFailure {
        error: String,
    },
    DatabaseChildStoreFailure {
        error: String,
    },
    DustLimit {
        vtxo: String,
        amount: u64,
        dust: u64,
    },
    ExitPackageBroadcastFailure {
        txid: String,
        error: String,
    },
    ExitPackageFinalizeFailure {
        error: String,
    },
    ExitPackageStoreFailure {
        txid: String,
        error: String,
    },
    ExitTxAlreadyBroadcast {
        vtxo: String,
        txid: String,
    },
    InsufficientConfirmedFunds {
        needed: u64,
        available: u64,
    },
    InternalError {
        error: String,
    },
    InvalidExitTransactionStatus {
        txid: String,
        status: ExitTxStatus,
        error: String,
    },
    /// Berth (bark 0.8).
    InvalidFeeMargin {
        margin: String,
    },
    InvalidLocktime {
        tip: u32,
        error: String,
    },
    InvalidWalletState {
        error: String,
    },
    MissingAnchorOutput {
        txid: String,
    },
    MissingExitTransaction {
        txid: String,
    },
    NonStandardVtxo {
        vtxo: String,
        error: String,
    },
    MovementRegistrationFailure {
        error: String,
    },
    NotExiting {
        vtxo: String,
    },
    TipRetrievalFailure {
        error: String,
    },
    TransactionRetrievalFailure {
        txid: String,
        error: String,
    },
    VtxoNotClaimable {
        vtxo: String,
    },
    UnknownVtxo {
        vtxo: String,
    },
    VtxoAlreadyExited {
        vtxo: String,
    },
    VtxoAlreadySpent {
        vtxo: String,
    },
    /// Berth (bark 0.8): the server swept the VTXO.
    VtxoSwept {
        vtxo: String,
    },
    VtxoScriptPubKeyInvalid {
        error: String,
    },
}

impl From<&bark::exit::ExitError> for ExitError {
    fn from(e: &bark::exit::ExitError) -> Self {
        use bark::exit::ExitError as E;
        let s = |v: &dyn ToString| v.to_string();
        match e {
            E::AncestorRetrievalFailure { txid, error } => ExitError::AncestorRetrievalFailure {
                txid: s(txid),
                error: error.clone(),
            },
            E::BlockRetrievalFailure { height, error } => ExitError::BlockRetrievalFailure {
                height: height.to_u32(),
                error: error.clone(),
            },
            E::CannotCancelExit { vtxo, state } => ExitError::CannotCancelExit {
                vtxo: s(vtxo),
                state: (*state).into(),
            },
            E::ClaimMissingInputs => ExitError::ClaimMissingInputs,
            E::ClaimFeeExceedsOutput { needed, output } => ExitError::ClaimFeeExceedsOutput {
                needed: needed.to_sat(),
                output: output.to_sat(),
            },
            E::ClaimMissingSignableClause { vtxo } => {
                ExitError::ClaimMissingSignableClause { vtxo: s(vtxo) }
            }
            E::ClaimSigningError { error } => ExitError::ClaimSigningError {
                error: error.clone(),
            },
            E::CyclicExitTransactions { vtxo } => {
                ExitError::CyclicExitTransactions { vtxo: s(vtxo) }
            }
            E::DatabaseVtxoStoreFailure { vtxo_id, error } => ExitError::DatabaseVtxoStoreFailure {
                vtxo_id: s(vtxo_id),
                error: error.clone(),
            },
            E::DatabaseChildRetrievalFailure { error } => {
                ExitError::DatabaseChildRetrievalFailure {
                    error: error.clone(),
                }
            }
            E::DatabaseChildStoreFailure { error } => ExitError::DatabaseChildStoreFailure {
                error: error.clone(),
            },
            E::DustLimit { vtxo, amount, dust } => ExitError::DustLimit {
                vtxo: s(vtxo),
                amount: amount.to_sat(),
                dust: dust.to_sat(),
            },
            E::ExitPackageBroadcastFailure { txid, error } => {
                ExitError::ExitPackageBroadcastFailure {
                    txid: s(txid),
                    error: s(error),
                }
            }
            E::ExitPackageFinalizeFailure { error } => ExitError::ExitPackageFinalizeFailure {
                error: error.clone(),
            },
            E::ExitPackageStoreFailure { txid, error } => ExitError::ExitPackageStoreFailure {
                txid: s(txid),
                error: error.clone(),
            },
            E::ExitTxAlreadyBroadcast { vtxo, txid } => ExitError::ExitTxAlreadyBroadcast {
                vtxo: s(vtxo),
                txid: s(txid),
            },
            E::InsufficientConfirmedFunds { needed, available } => {
                ExitError::InsufficientConfirmedFunds {
                    needed: needed.to_sat(),
                    available: available.to_sat(),
                }
            }
            E::InternalError { error } => ExitError::InternalError {
                error: error.clone(),
            },
            E::InvalidExitTransactionStatus {
                txid,
                status,
                error,
            } => ExitError::InvalidExitTransactionStatus {
                txid: s(txid),
                status: status.into(),
                error: error.clone(),
            },
            E::InvalidFeeMargin { margin } => ExitError::InvalidFeeMargin {
                margin: margin.clone(),
            },
            E::InvalidLocktime { tip, error } => ExitError::InvalidLocktime {
                tip: tip.to_u32(),
                error: error.clone(),
            },
            E::InvalidWalletState { error } => ExitError::InvalidWalletState {
                error: error.clone(),
            },
            E::MissingAnchorOutput { txid } => ExitError::MissingAnchorOutput { txid: s(txid) },
            E::MissingExitTransaction { txid } => {
                ExitError::MissingExitTransaction { txid: s(txid) }
            }
            E::NonStandardVtxo { vtxo, error } => ExitError::NonStandardVtxo {
                vtxo: s(vtxo),
                error: s(error),
            },
            E::MovementRegistrationFailure { error } => ExitError::MovementRegistrationFailure {
                error: error.clone(),
            },
            E::NotExiting { vtxo } => ExitError::NotExiting { vtxo: s(vtxo) },
            E::TipRetrievalFailure { error } => ExitError::TipRetrievalFailure {
                error: error.clone(),
            },
            E::TransactionRetrievalFailure { txid, error } => {
                ExitError::TransactionRetrievalFailure {
                    txid: s(txid),
                    error: error.clone(),
                }
            }
            E::VtxoNotClaimable { vtxo } => ExitError::VtxoNotClaimable { vtxo: s(vtxo) },
            E::UnknownVtxo { vtxo } => ExitError::UnknownVtxo { vtxo: s(vtxo) },
            E::VtxoAlreadyExited { vtxo } => ExitError::VtxoAlreadyExited { vtxo: s(vtxo) },
            E::VtxoAlreadySpent { vtxo } => ExitError::VtxoAlreadySpent { vtxo: s(vtxo) },
            E::VtxoSwept { vtxo } => ExitError::VtxoSwept { vtxo: s(vtxo) },
            E::VtxoScriptPubKeyInvalid { error } => ExitError::VtxoScriptPubKeyInvalid {
                error: error.clone(),
            },
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FeeInfo {
    pub fee_rate_sat_per_kvb: u64,
    pub total_fee_sat: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChildTransactionInfo {
    pub info: TransactionInfo,
    pub origin: ExitTxOrigin,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub fee_info: Option<FeeInfo>,
}

/// One exit transaction and the child that pays its fee.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExitTransactionPackage {
    pub exit: TransactionInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub child: Option<ChildTransactionInfo>,
}

/// An exit: its phase, and on request its past phases and transactions.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExitTransactionStatus {
    pub vtxo_id: String,
    pub state: ExitState,
    /// The phases before the current one, oldest first (with `history=true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub history: Option<Vec<ExitState>>,
    /// The exit's transactions, root first (with `transactions=true`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub transactions: Vec<ExitTransactionPackage>,
}

impl From<&bark::exit::ExitTransactionStatus> for ExitTransactionStatus {
    fn from(status: &bark::exit::ExitTransactionStatus) -> Self {
        ExitTransactionStatus {
            vtxo_id: status.vtxo_id.to_string(),
            state: (&status.state).into(),
            history: status
                .history
                .as_ref()
                .map(|h| h.iter().map(ExitState::from).collect()),
            transactions: status
                .transactions
                .iter()
                .map(|p| ExitTransactionPackage {
                    exit: TransactionInfo::from(&p.exit.tx),
                    child: p.child.as_ref().map(|c| ChildTransactionInfo {
                        info: TransactionInfo::from(&c.info.tx),
                        origin: (&c.origin).into(),
                        fee_info: c.fee_info.map(|f| FeeInfo {
                            fee_rate_sat_per_kvb: f.fee_rate.to_sat_per_kwu() * 4,
                            total_fee_sat: f.total_fee.to_sat(),
                        }),
                    }),
                })
                .collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ExitProgressStatus {
    pub vtxo_id: String,
    pub state: ExitState,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error: Option<ExitError>,
}
