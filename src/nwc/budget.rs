//! A connection's limits: the most one payment may be, and a budget that renews on
//! calendar boundaries in UTC (a day at midnight, a week on Monday, a month on the
//! 1st, a year on 1 January), as Alby's `get_budget` reports them. Pure functions over
//! the stored record, run inside the store's transaction (`Store::nwc_begin_payment`),
//! so a budget cannot be passed by two payments at once.

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};

use crate::nwc::protocol::{Code, Failure};
use crate::store::nwc::NwcConnectionRecord;

/// When a budget starts again.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Renewal {
    Daily,
    Weekly,
    Monthly,
    Yearly,
    Never,
}

impl Renewal {
    pub fn as_str(self) -> &'static str {
        match self {
            Renewal::Daily => "daily",
            Renewal::Weekly => "weekly",
            Renewal::Monthly => "monthly",
            Renewal::Yearly => "yearly",
            Renewal::Never => "never",
        }
    }

    pub fn parse(s: &str) -> Option<Renewal> {
        [
            Renewal::Daily,
            Renewal::Weekly,
            Renewal::Monthly,
            Renewal::Yearly,
            Renewal::Never,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }

    /// The start of the period `now` is in (the epoch for `Never`).
    pub fn period_start(self, now: DateTime<Utc>) -> DateTime<Utc> {
        let day = now.date_naive();
        let start = match self {
            Renewal::Daily => day,
            Renewal::Weekly => {
                day - Duration::days(i64::from(day.weekday().num_days_from_monday()))
            }
            Renewal::Monthly => NaiveDate::from_ymd_opt(day.year(), day.month(), 1).unwrap_or(day),
            Renewal::Yearly => NaiveDate::from_ymd_opt(day.year(), 1, 1).unwrap_or(day),
            Renewal::Never => return DateTime::<Utc>::UNIX_EPOCH,
        };
        Utc.from_utc_datetime(&start.and_hms_opt(0, 0, 0).unwrap_or_default())
    }

    /// When the period that began at `start` ends (`None` for `Never`).
    pub fn renews_at(self, start: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let day = start.date_naive();
        let next = match self {
            Renewal::Daily => day + Duration::days(1),
            Renewal::Weekly => day + Duration::days(7),
            Renewal::Monthly => {
                let (y, m) = if day.month() == 12 {
                    (day.year() + 1, 1)
                } else {
                    (day.year(), day.month() + 1)
                };
                NaiveDate::from_ymd_opt(y, m, 1)?
            }
            Renewal::Yearly => NaiveDate::from_ymd_opt(day.year() + 1, 1, 1)?,
            Renewal::Never => return None,
        };
        Some(Utc.from_utc_datetime(&next.and_hms_opt(0, 0, 0)?))
    }
}

fn micros(t: DateTime<Utc>) -> u64 {
    u64::try_from(t.timestamp_micros()).unwrap_or(0)
}

/// Whether the connection may be used at all at `now`: not revoked, not expired.
pub fn usable(connection: &NwcConnectionRecord, now: DateTime<Utc>) -> Result<(), Failure> {
    if connection.revoked_at_us.is_some() {
        return Err(Failure::new(
            Code::Unauthorized,
            "this connection was revoked by the wallet's owner",
        ));
    }
    if connection.expires_at_us.is_some_and(|at| at <= micros(now)) {
        return Err(Failure::new(
            Code::Unauthorized,
            "this connection has expired",
        ));
    }
    Ok(())
}

/// Bring the budget to the period `now` is in: a new period starts with nothing used.
pub fn renew(connection: &mut NwcConnectionRecord, now: DateTime<Utc>) {
    let renewal = Renewal::parse(&connection.budget_renewal).unwrap_or(Renewal::Never);
    let start = micros(renewal.period_start(now));
    if connection.budget_period_start_us != start {
        connection.budget_period_start_us = start;
        connection.budget_used_msat = 0;
    }
}

/// Take `amount_msat` for a payment: refused `QUOTA_EXCEEDED` over the per-payment
/// limit or the budget left (checked before the balance, so an over-limit payment is
/// refused whatever the wallet holds). On success the amount counts as used.
pub fn take(
    connection: &mut NwcConnectionRecord,
    amount_msat: u64,
    now: DateTime<Utc>,
) -> Result<(), Failure> {
    usable(connection, now)?;
    if let Some(max) = connection.max_payment_msat.filter(|max| amount_msat > *max) {
        return Err(Failure::new(
            Code::QuotaExceeded,
            format!(
                "{} sat is over this connection's limit of {} sat per payment",
                amount_msat.div_ceil(1000),
                max / 1000
            ),
        ));
    }
    renew(connection, now);
    if let Some(budget) = connection.budget_msat {
        let left = budget.saturating_sub(connection.budget_used_msat);
        if amount_msat > left {
            return Err(Failure::new(
                Code::QuotaExceeded,
                format!(
                    "{} sat is over what is left of this connection's budget ({} sat)",
                    amount_msat.div_ceil(1000),
                    left / 1000
                ),
            ));
        }
    }
    connection.budget_used_msat = connection.budget_used_msat.saturating_add(amount_msat);
    connection.payments += 1;
    connection.last_used_at_us = Some(micros(now));
    Ok(())
}

/// The budget as Alby's `get_budget` reports it (amounts in msat): `{}` without one.
pub fn report(connection: &NwcConnectionRecord, now: DateTime<Utc>) -> serde_json::Value {
    let Some(total) = connection.budget_msat else {
        return serde_json::json!({});
    };
    let mut current = connection.clone();
    renew(&mut current, now);
    let renewal = Renewal::parse(&current.budget_renewal).unwrap_or(Renewal::Never);
    let start = DateTime::<Utc>::from_timestamp_micros(
        i64::try_from(current.budget_period_start_us).unwrap_or(0),
    )
    .unwrap_or_default();
    let mut out = serde_json::json!({
        "used_budget": current.budget_used_msat,
        "total_budget": total,
        "renewal_period": renewal.as_str(),
    });
    if let Some(at) = renewal.renews_at(start) {
        out["renews_at"] = serde_json::json!(at.timestamp());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .expect("ok")
            .with_timezone(&Utc)
    }

    fn connection(budget: Option<u64>, max: Option<u64>, renewal: Renewal) -> NwcConnectionRecord {
        NwcConnectionRecord {
            id: "0123456789abcdef".into(),
            name: "app".into(),
            service_secret: [1; 32],
            client_pubkey: [2; 32],
            methods: vec!["pay_invoice".into()],
            max_payment_msat: max,
            budget_msat: budget,
            budget_renewal: renewal.as_str().into(),
            budget_used_msat: 0,
            budget_period_start_us: 0,
            spent_total_msat: 0,
            relays: vec![],
            created_at_us: 0,
            expires_at_us: None,
            revoked_at_us: None,
            last_used_at_us: None,
            payments: 0,
        }
    }

    #[test]
    fn periods_start_and_end_on_calendar_boundaries_in_utc() {
        let now = at("2026-11-28T19:45:00Z"); // a Saturday
        assert_eq!(Renewal::Daily.period_start(now), at("2026-11-28T00:00:00Z"));
        assert_eq!(
            Renewal::Weekly.period_start(now),
            at("2026-11-23T00:00:00Z")
        );
        assert_eq!(
            Renewal::Monthly.period_start(now),
            at("2026-11-01T00:00:00Z")
        );
        assert_eq!(
            Renewal::Yearly.period_start(now),
            at("2026-01-01T00:00:00Z")
        );
        assert_eq!(
            Renewal::Monthly.renews_at(at("2026-12-01T00:00:00Z")),
            Some(at("2027-01-01T00:00:00Z"))
        );
        assert_eq!(
            Renewal::Weekly.renews_at(at("2026-11-23T00:00:00Z")),
            Some(at("2026-11-30T00:00:00Z"))
        );
        assert_eq!(Renewal::Never.renews_at(now), None);
    }

    #[test]
    fn a_budget_is_taken_up_to_its_total_and_renews_with_the_period() {
        let mut c = connection(Some(10_000_000), None, Renewal::Daily);
        let day1 = at("2026-11-28T10:00:00Z");
        take(&mut c, 6_000_000, day1).expect("ok");
        let refused = take(&mut c, 5_000_000, day1).expect_err("refused");
        assert_eq!(refused.code, Code::QuotaExceeded);
        assert_eq!(c.budget_used_msat, 6_000_000, "a refusal takes nothing");
        take(&mut c, 4_000_000, day1).expect("ok");
        assert_eq!(report(&c, day1)["used_budget"], 10_000_000);
        // The next day, the budget is whole again.
        let day2 = at("2026-11-29T00:00:01Z");
        assert_eq!(report(&c, day2)["used_budget"], 0);
        take(&mut c, 10_000_000, day2).expect("ok");
    }

    #[test]
    fn the_per_payment_limit_and_revocation_are_checked_first() {
        let mut c = connection(None, Some(1_000_000), Renewal::Never);
        let now = at("2026-11-28T10:00:00Z");
        assert_eq!(
            take(&mut c, 1_000_001, now).expect_err("refused").code,
            Code::QuotaExceeded
        );
        take(&mut c, 1_000_000, now).expect("ok");
        c.revoked_at_us = Some(1);
        assert_eq!(
            take(&mut c, 1, now).expect_err("refused").code,
            Code::Unauthorized
        );
        assert_eq!(report(&c, now), serde_json::json!({}));
    }
}
