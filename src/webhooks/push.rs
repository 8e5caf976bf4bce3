//! Push to phones without a vendor's cloud: a paired device registers the URL its push
//! distributor gave it (UnifiedPush, or an ntfy topic), and berthd POSTs a short text
//! there for each event of the kinds the device chose. The request is ntfy's publish
//! format — the message as the body, `Title`, `Priority` and `Tags` headers — which a
//! UnifiedPush endpoint takes as the push's payload.
//!
//! What a device hears is its own choice ([`Category`]) and never more than it may see
//! through the API: approvals only about itself unless it has the admin scope, payments
//! only its own when its rules say `history: own`. Amounts and addresses stay out of
//! the text unless the device opted in (`details`): a lock screen is not private.

use std::sync::Arc;

use bark::movement::MovementStatus;
use reqwest::Url;

use super::{WebhookError, WebhookView, Webhooks, check_url, now_us, sign};
use crate::events::{Event, EventKind};
use crate::store::webhooks::{PushTarget, WebhookRecord, push_id};

/// What a device may choose to hear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// A payment received or sent (once settled).
    Payments,
    /// VTXOs near expiry, a refresh in trouble, the exit reserve low.
    Expiry,
    /// Exits started or ready to claim.
    Exits,
    /// Backups failing, the disk full.
    Backups,
    /// Payments waiting for the owner's approval, and what became of them.
    Approvals,
    /// A new device paired.
    Pairing,
    /// The Ark server unreachable, seed recovery's outcome, a webhook disabled.
    System,
}

impl Category {
    pub const ALL: [Category; 7] = [
        Category::Payments,
        Category::Expiry,
        Category::Exits,
        Category::Backups,
        Category::Approvals,
        Category::Pairing,
        Category::System,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Category::Payments => "payments",
            Category::Expiry => "expiry",
            Category::Exits => "exits",
            Category::Backups => "backups",
            Category::Approvals => "approvals",
            Category::Pairing => "pairing",
            Category::System => "system",
        }
    }

    pub fn parse(name: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The category of an event kind (`None`: never pushed).
    fn of(kind: EventKind) -> Option<Category> {
        Some(match kind {
            EventKind::MovementCreated | EventKind::MovementUpdated => Category::Payments,
            EventKind::VtxoExpiring | EventKind::ExitReserveLow => Category::Expiry,
            EventKind::ExitStarted | EventKind::ExitClaimable => Category::Exits,
            EventKind::BackupFailed | EventKind::DiskFull => Category::Backups,
            EventKind::ApprovalRequested | EventKind::ApprovalUpdated => Category::Approvals,
            EventKind::DevicePaired => Category::Pairing,
            EventKind::ArkServerUnreachable
            | EventKind::SeedRecovery
            | EventKind::WebhookDisabled
            | EventKind::SystemUpdated
            | EventKind::SystemUpdateFailed => Category::System,
            EventKind::ChannelLagging | EventKind::Test => return None,
        })
    }
}

/// Who the push goes to, as far as what it may hear goes.
pub struct Listener<'a> {
    pub device_id: &'a str,
    pub admin: bool,
    /// Its rules say `history: own`.
    pub own_history: bool,
}

/// One push: what the phone shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Push {
    pub title: String,
    pub message: String,
    /// ntfy's 1 (min) to 5 (max).
    pub priority: u8,
    /// ntfy's tags (emoji short codes shown beside the title).
    pub tags: &'static str,
}

fn sats(amount: i64) -> String {
    format!(
        "{} sat",
        crate::engine::spending::sats(amount.unsigned_abs())
    )
}

/// The push for `event`, if `categories` and what `listener` may see let it through.
pub fn render(
    event: &Event,
    categories: &[Category],
    details: bool,
    listener: &Listener<'_>,
) -> Option<Push> {
    let category = Category::of(event.kind)?;
    if !categories.contains(&category) {
        return None;
    }
    let alert = event.alert.as_ref();
    let said = |generic: &str| match alert {
        Some(a) if details && !a.message.is_empty() => a.message.clone(),
        _ => generic.to_string(),
    };
    let push = |title: &str, message: String, priority: u8, tags: &'static str| {
        Some(Push {
            title: title.into(),
            message,
            priority,
            tags,
        })
    };
    match event.kind {
        EventKind::MovementCreated | EventKind::MovementUpdated => {
            let m = event.movement.as_ref()?;
            if m.status != MovementStatus::Successful {
                return None;
            }
            if listener.own_history
                && !listener.admin
                && !crate::engine::spending::paid_by(m, listener.device_id)
            {
                return None;
            }
            use bark::subsystem::Subsystem;
            let amount = m.effective_balance.to_sat();
            let by = m.subsystem.name.as_str();
            let received = [Subsystem::ARKOOR, Subsystem::LIGHTNING_RECEIVE]
                .iter()
                .any(|s| s.as_name() == by);
            let sent = [
                Subsystem::ARKOOR,
                Subsystem::LIGHTNING_SEND,
                Subsystem::OFFBOARD,
            ]
            .iter()
            .any(|s| s.as_name() == by);
            if received && amount > 0 {
                let message = if details {
                    format!("You received {}.", sats(amount))
                } else {
                    "A payment arrived in your wallet.".into()
                };
                push("Payment received", message, 3, "moneybag")
            } else if sent && amount < 0 {
                let message = if details {
                    format!("You sent {}.", sats(amount))
                } else {
                    "A payment left your wallet.".into()
                };
                push("Payment sent", message, 3, "outbox_tray")
            } else {
                // Boards, refreshes, exits: the wallet's own moves, not payments.
                None
            }
        }
        EventKind::VtxoExpiring => push(
            "Funds need a refresh",
            said("Some of your funds must be refreshed soon. berthd is working on it."),
            4,
            "hourglass",
        ),
        EventKind::ExitReserveLow => push(
            "On-chain reserve low",
            said("The on-chain balance cannot pay for exiting every VTXO."),
            4,
            "warning",
        ),
        EventKind::ExitStarted => push(
            "Exit started",
            said("Funds are being moved on-chain without the Ark server."),
            4,
            "rotating_light",
        ),
        EventKind::ExitClaimable => push(
            "Exit ready to claim",
            said("Funds from an exit can be claimed now."),
            4,
            "white_check_mark",
        ),
        EventKind::BackupFailed => push(
            "Backup failed",
            // The reason names paths: only with details.
            said("Scheduled backups are failing. Open the console to see why."),
            4,
            "floppy_disk",
        ),
        EventKind::DiskFull => push(
            "Disk full",
            said("The box's disk is full: payments are refused until space is freed."),
            5,
            "warning",
        ),
        EventKind::ApprovalRequested | EventKind::ApprovalUpdated => {
            let approval = alert?.approval.as_ref()?;
            if !listener.admin && approval.device_id != listener.device_id {
                return None;
            }
            let mine = approval.device_id == listener.device_id;
            let (title, message) = match (event.kind, approval.state.as_str()) {
                (EventKind::ApprovalRequested, _) if mine => (
                    "Waiting for approval",
                    "Your payment waits for the owner's approval.".to_string(),
                ),
                (EventKind::ApprovalRequested, _) => (
                    "Approve a payment?",
                    said("A payment waits for your approval in the console."),
                ),
                (_, "approved" | "executed") => {
                    ("Payment approved", "The payment was approved.".to_string())
                }
                (_, "denied") => ("Payment denied", "The payment was denied.".to_string()),
                (_, "expired") => (
                    "Approval expired",
                    "Nobody approved the payment in time.".to_string(),
                ),
                _ => return None,
            };
            let priority = if event.kind == EventKind::ApprovalRequested {
                4
            } else {
                3
            };
            push(title, message, priority, "raised_hand")
        }
        EventKind::DevicePaired => push(
            "New device paired",
            said("A new device was paired with your wallet."),
            4,
            "iphone",
        ),
        EventKind::ArkServerUnreachable => push(
            "Ark server unreachable",
            said("The wallet cannot reach its Ark server."),
            3,
            "satellite",
        ),
        EventKind::SeedRecovery => push(
            "Wallet recovered",
            said("Seed recovery finished. Open the console to see what it found."),
            3,
            "seedling",
        ),
        EventKind::WebhookDisabled => push(
            "Webhook disabled",
            said("A webhook kept failing and was disabled."),
            3,
            "warning",
        ),
        EventKind::SystemUpdated => push(
            "System updated",
            said("The box runs its new system."),
            3,
            "package",
        ),
        EventKind::SystemUpdateFailed => push(
            "System update failed",
            // The reason names slots and builds: only with details.
            said(
                "The system update did not take: the box runs the system it had. Open the console to see why.",
            ),
            4,
            "warning",
        ),
        EventKind::ChannelLagging | EventKind::Test => None,
    }
}

/// A device's subscription, as the API and the console manage it.
impl Webhooks {
    /// Set device `device_id`'s push subscription: where (checked by the egress policy
    /// for destinations clients name), which categories, with details or not. It hears
    /// what is appended from now on (a new subscription) or goes on where it was.
    pub async fn set_push(
        self: &Arc<Self>,
        device_id: &str,
        url: String,
        categories: Vec<String>,
        details: bool,
    ) -> Result<WebhookView, WebhookError> {
        check_url(&url)?;
        let parsed = Url::parse(&url).map_err(|e| WebhookError::Invalid(e.to_string()))?;
        self.push_egress
            .check(&parsed)
            .map_err(|e| WebhookError::Invalid(e.to_string()))?;
        if categories.is_empty() {
            return Err(WebhookError::Invalid(format!(
                "categories names at least one of {}",
                Category::ALL.map(|c| c.name()).join(", ")
            )));
        }
        let mut chosen: Vec<String> = Vec::new();
        for name in categories {
            if Category::parse(&name).is_none() {
                return Err(WebhookError::Invalid(format!(
                    "{name:?} is not a category; the categories are {}",
                    Category::ALL.map(|c| c.name()).join(", ")
                )));
            }
            if !chosen.contains(&name) {
                chosen.push(name);
            }
        }
        let fresh = WebhookRecord {
            url,
            events: Vec::new(),
            description: None,
            secret: sign::new_secret(),
            previous_secret: None,
            created_at_us: now_us(),
            disabled: None,
            cursor: self.events.latest_id(),
            failed_attempts: 0,
            failing_since_us: None,
            next_attempt_us: 0,
            redeliver: Vec::new(),
            push: Some(PushTarget {
                device_id: device_id.to_string(),
                categories: chosen,
                details,
            }),
        };
        let id = push_id(device_id);
        let record = self
            .store
            .put_push(device_id, fresh)
            .await?
            .ok_or_else(|| WebhookError::NoSuchWebhook(id.clone()))?;
        let running = self
            .workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .is_some_and(|w| !w.task.is_finished());
        if running {
            self.wake(&id);
        } else {
            self.spawn(id.clone());
        }
        Ok(WebhookView { id, record })
    }

    /// Device `device_id`'s push subscription, if it has one.
    pub async fn push_of(&self, device_id: &str) -> Result<Option<WebhookView>, WebhookError> {
        let id = push_id(device_id);
        Ok(self
            .store
            .webhook(&id)
            .await?
            .map(|record| WebhookView { id, record }))
    }

    /// Remove device `device_id`'s push subscription: `false` when it had none.
    pub async fn remove_push(&self, device_id: &str) -> Result<bool, WebhookError> {
        let id = push_id(device_id);
        let removed = self.store.remove_webhook(&id).await?;
        if let Some(worker) = self
            .workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
        {
            worker.task.abort();
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_as_people_write_them() {
        assert_eq!(sats(21_000), "21,000 sat");
        assert_eq!(sats(-1_234_567), "1,234,567 sat");
        assert_eq!(sats(999), "999 sat");
    }

    #[test]
    fn every_category_has_a_name_it_is_parsed_from() {
        for c in Category::ALL {
            assert_eq!(Category::parse(c.name()), Some(c));
        }
        assert_eq!(Category::parse("updates"), None);
    }
}
