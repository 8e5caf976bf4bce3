//! Connections as the owner makes, lists and revokes them (the API and the console
//! call these): checked when made (name, methods served, amounts, relays against the
//! egress policy), with keys of their own and a URI whose secret berthd does not keep.

use chrono::{DateTime, Utc};
use nostr::{Keys, PublicKey, SecretKey};
use url::Url;

use crate::nwc::budget::{self, Renewal};
use crate::nwc::{
    MAX_CONNECTIONS, MAX_NAME, MAX_RELAYS, MAX_RELAYS_PER_CONNECTION, Nwc, from_us, lock, now_us,
    protocol,
};
use crate::store::StoreError;
use crate::store::nwc::NwcConnectionRecord;

/// Why a connection could not be made or revoked.
#[derive(Debug, thiserror::Error)]
pub enum NwcError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Full(String),
    #[error("no connection {0}")]
    NoSuchConnection(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What the owner asks for in a new connection.
#[derive(Debug, Clone, Default)]
pub struct NewConnection {
    pub name: String,
    pub methods: Option<Vec<String>>,
    pub max_payment_sat: Option<u64>,
    pub budget_sat: Option<u64>,
    pub budget_renewal: Option<Renewal>,
    pub expires_at: Option<DateTime<Utc>>,
    pub relays: Option<Vec<String>>,
}

/// A connection as the owner sees it (no secret).
#[derive(Debug, Clone)]
pub struct ConnectionView {
    pub id: String,
    pub name: String,
    pub methods: Vec<String>,
    pub max_payment_sat: Option<u64>,
    pub budget_sat: Option<u64>,
    pub budget_used_sat: u64,
    pub budget_renewal: String,
    pub budget_renews_at: Option<DateTime<Utc>>,
    pub spent_total_sat: u64,
    pub payments: u64,
    pub relays: Vec<String>,
    pub service_pubkey: String,
    pub client_pubkey: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

impl Nwc {
    /// Make a connection: its keys, its record, and the URI (with the client's secret,
    /// which berthd does not keep).
    pub async fn create(&self, new: NewConnection) -> Result<(ConnectionView, String), NwcError> {
        let name = new.name.trim().to_string();
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(NwcError::Invalid(format!("name: 1 to {MAX_NAME} bytes")));
        }
        let methods = match new.methods {
            None => protocol::grants().map(str::to_string).collect(),
            Some(asked) => {
                if asked.is_empty() {
                    return Err(NwcError::Invalid("methods: at least one".into()));
                }
                // In the served order, each once.
                for m in &asked {
                    if !protocol::grants().any(|g| g == m) {
                        return Err(NwcError::Invalid(format!(
                            "methods: {m:?} is not served; these are: {}",
                            protocol::grants().collect::<Vec<_>>().join(", ")
                        )));
                    }
                }
                protocol::grants()
                    .filter(|g| asked.iter().any(|a| a == g))
                    .map(str::to_string)
                    .collect()
            }
        };
        const MAX_SAT: u64 = 21_000_000 * 100_000_000;
        for (what, value) in [
            ("max_payment_sat", new.max_payment_sat),
            ("budget_sat", new.budget_sat),
        ] {
            if value.is_some_and(|v| v == 0 || v > MAX_SAT) {
                return Err(NwcError::Invalid(format!("{what}: 1 to {MAX_SAT}")));
            }
        }
        let renewal = match (new.budget_sat, new.budget_renewal) {
            (None, Some(_)) => {
                return Err(NwcError::Invalid(
                    "budget_renewal: only with budget_sat".into(),
                ));
            }
            (None, None) => Renewal::Never,
            (Some(_), renewal) => renewal.unwrap_or(Renewal::Monthly),
        };
        let now = Utc::now();
        if new.expires_at.is_some_and(|at| at <= now) {
            return Err(NwcError::Invalid(
                "expires_at: must be in the future".into(),
            ));
        }
        let relays = self.check_relays(new.relays)?;
        let service = Keys::generate();
        let client = Keys::generate();
        let mut id = [0u8; 8];
        getrandom::fill(&mut id).map_err(|e| NwcError::Invalid(format!("no randomness: {e}")))?;
        let record = NwcConnectionRecord {
            id: id.iter().map(|b| format!("{b:02x}")).collect(),
            name,
            service_secret: service.secret_key().secret_bytes(),
            client_pubkey: client.public_key().to_bytes(),
            methods,
            max_payment_msat: new.max_payment_sat.map(|s| s * 1000),
            budget_msat: new.budget_sat.map(|s| s * 1000),
            budget_renewal: renewal.as_str().into(),
            budget_used_msat: 0,
            budget_period_start_us: u64::try_from(renewal.period_start(now).timestamp_micros())
                .unwrap_or(0),
            spent_total_msat: 0,
            relays: relays.iter().map(Url::to_string).collect(),
            created_at_us: now_us(),
            expires_at_us: new
                .expires_at
                .map(|at| u64::try_from(at.timestamp_micros()).unwrap_or(u64::MAX)),
            revoked_at_us: None,
            last_used_at_us: None,
            payments: 0,
        };
        self.store
            .nwc_add_connection(record.clone(), MAX_CONNECTIONS)
            .await
            .map_err(|e| match e {
                StoreError::Rejected(why) => NwcError::Full(why),
                e => NwcError::Store(e),
            })?;
        self.reload().await?;
        let mut uri = format!("nostr+walletconnect://{}?", service.public_key().to_hex());
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        for relay in &relays {
            query.append_pair("relay", relay.as_str());
        }
        query.append_pair("secret", &client.secret_key().to_secret_hex());
        uri.push_str(&query.finish());
        tracing::info!(target: "berth::nwc", id = %record.id, name = %record.name, "a wallet connection was made");
        Ok((self.view(&record), uri))
    }

    /// The relays of a new connection: checked against the egress policy now, so the
    /// owner hears of a refused one at once; within [`MAX_RELAYS`] over all.
    pub(super) fn check_relays(&self, asked: Option<Vec<String>>) -> Result<Vec<Url>, NwcError> {
        let asked = asked.unwrap_or_else(|| self.settings.relays.clone());
        if asked.is_empty() {
            return Err(NwcError::Invalid(
                "relays: none given, and berth.toml names none ([nwc] relays)".into(),
            ));
        }
        if asked.len() > MAX_RELAYS_PER_CONNECTION {
            return Err(NwcError::Invalid(format!(
                "relays: at most {MAX_RELAYS_PER_CONNECTION}"
            )));
        }
        let mut relays = Vec::new();
        for text in asked {
            let url = Url::parse(&text)
                .map_err(|e| NwcError::Invalid(format!("relays: {text:?} is not a URL: {e}")))?;
            self.egress
                .check_websocket(&url)
                .map_err(|e| NwcError::Invalid(format!("relays: {url}: {e}")))?;
            if !relays.contains(&url) {
                relays.push(url);
            }
        }
        let mut all = self.snapshot.borrow().relays();
        all.extend(relays.iter().cloned());
        if all.len() > MAX_RELAYS {
            return Err(NwcError::Full(format!(
                "berthd keeps at most {MAX_RELAYS} relays over all connections; use one of \
                 those it has"
            )));
        }
        Ok(relays)
    }

    /// The connections in use (revoked ones are not listed), oldest first.
    pub async fn list(&self) -> Result<Vec<ConnectionView>, NwcError> {
        Ok(self
            .store
            .nwc_connections()
            .await?
            .iter()
            .filter(|r| r.revoked_at_us.is_none())
            .map(|r| self.view(r))
            .collect())
    }

    /// Revoke a connection: from the moment this returns, none of its requests is
    /// executed (a payment checks the record in the transaction that begins it).
    /// Each stored connection's payments, for `/metrics`: (id, name, payments asked
    /// for, sats paid). Empty when the store cannot be read (the metrics go on).
    pub async fn usage(&self) -> Vec<(String, String, u64, u64)> {
        match self.store.nwc_connections().await {
            Ok(all) => all
                .into_iter()
                .map(|c| (c.id, c.name, c.payments, c.spent_total_msat / 1000))
                .collect(),
            Err(e) => {
                tracing::warn!(target: "berth::nwc", error = %e, "cannot read the connections");
                Vec::new()
            }
        }
    }

    pub async fn revoke(&self, id: &str) -> Result<(), NwcError> {
        match self.store.nwc_revoke_connection(id, now_us()).await? {
            None => Err(NwcError::NoSuchConnection(id.to_string())),
            Some(record) => {
                tracing::info!(target: "berth::nwc", id = %record.id, name = %record.name, "a wallet connection was revoked");
                self.reload().await?;
                Ok(())
            }
        }
    }

    pub(super) fn view(&self, r: &NwcConnectionRecord) -> ConnectionView {
        let now = Utc::now();
        let mut current = r.clone();
        budget::renew(&mut current, now);
        let renewal = Renewal::parse(&r.budget_renewal).unwrap_or(Renewal::Never);
        let last_used = lock(&self.last_used)
            .get(&r.id)
            .copied()
            .max(r.last_used_at_us);
        ConnectionView {
            id: r.id.clone(),
            name: r.name.clone(),
            methods: r.methods.clone(),
            max_payment_sat: r.max_payment_msat.map(|m| m / 1000),
            budget_sat: r.budget_msat.map(|m| m / 1000),
            budget_used_sat: current.budget_used_msat.div_ceil(1000),
            budget_renewal: r.budget_renewal.clone(),
            budget_renews_at: r
                .budget_msat
                .and_then(|_| renewal.renews_at(from_us(current.budget_period_start_us))),
            spent_total_sat: r.spent_total_msat.div_ceil(1000),
            payments: r.payments,
            relays: r.relays.clone(),
            service_pubkey: SecretKey::from_slice(&r.service_secret)
                .map(|s| Keys::new(s).public_key().to_hex())
                .unwrap_or_default(),
            client_pubkey: PublicKey::from_slice(&r.client_pubkey)
                .map(|k| k.to_hex())
                .unwrap_or_default(),
            created_at: from_us(r.created_at_us),
            expires_at: r.expires_at_us.map(from_us),
            last_used_at: last_used.map(from_us),
        }
    }
}
