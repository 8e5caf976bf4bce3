//! The event vocabulary: what an event in the durable log says happened, and what an
//! alert of Berth's own background work says. The store keeps it inside every stored
//! event, and the API speaks it (as the `type` of a notification, through `events`,
//! which re-exports it); it depends on nothing of Berth's.

/// The details of an alert raised by Berth's own background work (the autopilot): a
/// sentence for people, and the facts behind it for programs.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Alert {
    pub message: String,
    /// The VTXOs concerned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vtxos: Vec<String>,
    /// Their total value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount_sat: Option<u64>,
    /// Blocks left before the first of them can no longer be exited safely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks_left: Option<i64>,
    /// How much the on-chain wallet lacks to pay for exiting every VTXO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shortfall_sat: Option<u64>,
    /// The approval concerned (approval kinds only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalAlert>,
}

/// What an approval event says of the payment held for the owner.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct ApprovalAlert {
    pub id: String,
    /// `pending`, `approved`, `denied`, `expired` or `executed`.
    pub state: String,
    /// The device that asked to pay.
    pub device_id: String,
    /// `ark`, `lightning`, `onchain`, `offboard` or `exit`.
    pub payment_kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// The approved request's HTTP status, once it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

/// What an event says happened. Names are the API's `type` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    MovementCreated,
    MovementUpdated,
    /// bark's notification channel overflowed before the log recorded everything.
    ChannelLagging,
    /// Alerts of the autopilot (opt-in types, `docs/events.md`).
    VtxoExpiring,
    ExitStarted,
    ExitClaimable,
    ExitReserveLow,
    ArkServerUnreachable,
    /// What seed recovery found when an imported wallet was created (opt-in, like the
    /// alerts).
    SeedRecovery,
    /// A scheduled backup failed (the first of a run of failures; opt-in, like the
    /// alerts).
    BackupFailed,
    /// The disk under the datadir entered the reserve berthd keeps free, and changes
    /// are refused (`api::disk`; opt-in, like the alerts).
    DiskFull,
    /// A device's payment over its rules waits for the owner's approval
    /// (`engine::spending::approvals`; opt-in, delivered to admin credentials and the
    /// device concerned).
    ApprovalRequested,
    /// An approval was approved, denied, expired or ran (opt-in, as above).
    ApprovalUpdated,
}
