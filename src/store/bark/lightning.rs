//! Lightning records: paid invoices and settled receives, each written once (the first
//! record wins) and never deleted.

use ark::lightning::{PaymentHash, Preimage};
use bark::persist::models::{PaidInvoice, SettledLightningReceive};
use bitcoin::Amount;
use chrono::Local;
use lightning_invoice::Bolt11Invoice;
use redb::ReadableTable;

use super::tables::get_decoded;
use crate::store::Store;
use crate::store::codec::Envelope;
use crate::store::error::RedbResultExt;
use crate::store::schema::*;

/// `BarkPersister::record_paid_invoice`.
pub(super) async fn record_paid_invoice(
    store: &Store,
    payment_hash: PaymentHash,
    preimage: Preimage,
) -> anyhow::Result<()> {
    const CTX: &str = "recording a paid invoice";
    store
        .write(CTX, move |tx| {
            let mut table = tx.open_table(PAID_INVOICES).ctx(CTX)?;
            let key = payment_hash.to_byte_array();
            // Idempotent: the first record (and its paid_at) wins.
            if table.get(key).ctx(CTX)?.is_none() {
                let paid = PaidInvoice {
                    payment_hash,
                    preimage,
                    paid_at: Local::now(),
                };
                table.insert(key, Envelope::encode(&paid)?).ctx(CTX)?;
            }
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::get_paid_invoice`.
pub(super) async fn paid_invoice(
    store: &Store,
    payment_hash: PaymentHash,
) -> anyhow::Result<Option<PaidInvoice>> {
    const CTX: &str = "reading a paid invoice";
    Ok(store
        .read(CTX, move |tx| {
            get_decoded(
                &tx.open_table(PAID_INVOICES).ctx(CTX)?,
                payment_hash.to_byte_array(),
                CTX,
            )
        })
        .await?)
}

/// `BarkPersister::record_settled_lightning_receive`.
pub(super) async fn record_settled_receive(
    store: &Store,
    payment_hash: PaymentHash,
    preimage: Preimage,
    invoice: &Bolt11Invoice,
    amount: Amount,
) -> anyhow::Result<()> {
    const CTX: &str = "recording a settled lightning receive";
    let invoice = invoice.clone();
    store
        .write(CTX, move |tx| {
            let mut table = tx.open_table(SETTLED_LIGHTNING_RECEIVES).ctx(CTX)?;
            let key = payment_hash.to_byte_array();
            if table.get(key).ctx(CTX)?.is_none() {
                let settled = SettledLightningReceive {
                    payment_hash,
                    preimage,
                    invoice,
                    amount,
                    settled_at: Local::now(),
                };
                table.insert(key, Envelope::encode(&settled)?).ctx(CTX)?;
            }
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::get_settled_lightning_receive`.
pub(super) async fn settled_receive(
    store: &Store,
    payment_hash: PaymentHash,
) -> anyhow::Result<Option<SettledLightningReceive>> {
    const CTX: &str = "reading a settled lightning receive";
    Ok(store
        .read(CTX, move |tx| {
            let table = tx.open_table(SETTLED_LIGHTNING_RECEIVES).ctx(CTX)?;
            get_decoded(&table, payment_hash.to_byte_array(), CTX)
        })
        .await?)
}
