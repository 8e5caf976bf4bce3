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
    /// The webhook endpoint concerned (`test`, `webhook-disabled`): a test event is
    /// delivered to it alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_id: Option<String>,
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
    /// The owner asked for a test delivery to one webhook endpoint (`webhooks`); only
    /// that endpoint receives it.
    Test,
    /// A webhook endpoint failed for about three days and berthd stopped delivering to
    /// it (opt-in, like the alerts).
    WebhookDisabled,
    /// A phone or app was paired (not a console sign-in; opt-in, like the alerts).
    DevicePaired,
    /// A system update the owner started was installed and kept (`system_update`;
    /// opt-in, like the alerts).
    SystemUpdated,
    /// A system update the owner started failed, or was tried and rolled back (opt-in,
    /// like the alerts).
    SystemUpdateFailed,
}

impl EventKind {
    /// Every kind, in the order the documentation lists them.
    pub const ALL: [EventKind; 18] = [
        EventKind::MovementCreated,
        EventKind::MovementUpdated,
        EventKind::ChannelLagging,
        EventKind::VtxoExpiring,
        EventKind::ExitStarted,
        EventKind::ExitClaimable,
        EventKind::ExitReserveLow,
        EventKind::ArkServerUnreachable,
        EventKind::SeedRecovery,
        EventKind::BackupFailed,
        EventKind::DiskFull,
        EventKind::ApprovalRequested,
        EventKind::ApprovalUpdated,
        EventKind::Test,
        EventKind::WebhookDisabled,
        EventKind::DevicePaired,
        EventKind::SystemUpdated,
        EventKind::SystemUpdateFailed,
    ];

    /// The kind's name: its serialised form, and the API's `type`.
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::MovementCreated => "movement-created",
            EventKind::MovementUpdated => "movement-updated",
            EventKind::ChannelLagging => "channel-lagging",
            EventKind::VtxoExpiring => "vtxo-expiring",
            EventKind::ExitStarted => "exit-started",
            EventKind::ExitClaimable => "exit-claimable",
            EventKind::ExitReserveLow => "exit-reserve-low",
            EventKind::ArkServerUnreachable => "ark-server-unreachable",
            EventKind::SeedRecovery => "seed-recovery",
            EventKind::BackupFailed => "backup-failed",
            EventKind::DiskFull => "disk-full",
            EventKind::ApprovalRequested => "approval-requested",
            EventKind::ApprovalUpdated => "approval-updated",
            EventKind::Test => "test",
            EventKind::WebhookDisabled => "webhook-disabled",
            EventKind::DevicePaired => "device-paired",
            EventKind::SystemUpdated => "system-updated",
            EventKind::SystemUpdateFailed => "system-update-failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EventKind;

    /// The names are the serialised forms, so the store and the API agree.
    #[test]
    fn names_are_the_serialised_forms() {
        for kind in EventKind::ALL {
            assert_eq!(
                serde_json::to_value(kind).expect("serialise"),
                serde_json::Value::String(kind.name().into())
            );
        }
    }
}
