//! A device's spending rules as the owner writes them, and the calendar periods its
//! budgets renew with (`engine::spending` enforces them).

use std::time::Duration as StdDuration;

use bitcoin::Amount;
use chrono::{DateTime, Datelike, Duration, Local, NaiveDate, TimeZone};

use super::approvals;

/// The most budgets one device may have.
pub const MAX_BUDGETS: usize = 8;

/// For tests of periods without waiting for them: seconds added to the clock the rules
/// read. Ships in the release binary like the store's fault trigger (the binary tested
/// is the binary run), off unless set, and berthd warns at start when it is.
pub const CLOCK_OFFSET_ENV: &str = "BERTH_SPENDING_CLOCK_OFFSET_SECS";

/// The kinds of payment a rule can allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaymentKind {
    /// To an Ark address, out of round.
    Ark,
    /// A Lightning invoice, offer, address or LNURL.
    Lightning,
    /// From the on-chain wallet.
    Onchain,
    /// From Ark to a bitcoin address (offboard, send on-chain).
    Offboard,
    /// Unilateral exits: started, and claimed to an address.
    Exit,
}

impl PaymentKind {
    pub const ALL: [PaymentKind; 5] = [
        PaymentKind::Ark,
        PaymentKind::Lightning,
        PaymentKind::Onchain,
        PaymentKind::Offboard,
        PaymentKind::Exit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PaymentKind::Ark => "ark",
            PaymentKind::Lightning => "lightning",
            PaymentKind::Onchain => "onchain",
            PaymentKind::Offboard => "offboard",
            PaymentKind::Exit => "exit",
        }
    }

    pub fn parse(s: &str) -> Option<PaymentKind> {
        PaymentKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// A budget's period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Day,
    Week,
    Month,
    Year,
}

impl Period {
    pub const ALL: [Period; 4] = [Period::Day, Period::Week, Period::Month, Period::Year];

    pub fn as_str(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
            Period::Year => "year",
        }
    }

    pub fn parse(s: &str) -> Option<Period> {
        Period::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// The first day of the period `day` is in.
    fn first_day(self, day: NaiveDate) -> NaiveDate {
        match self {
            Period::Day => day,
            Period::Week => day - Duration::days(i64::from(day.weekday().num_days_from_monday())),
            Period::Month => day.with_day(1).unwrap_or(day),
            Period::Year => NaiveDate::from_ymd_opt(day.year(), 1, 1).unwrap_or(day),
        }
    }

    /// The first day of the period after the one that began on `first`.
    fn next_first_day(self, first: NaiveDate) -> NaiveDate {
        match self {
            Period::Day => first + Duration::days(1),
            Period::Week => first + Duration::days(7),
            Period::Month => first
                .checked_add_months(chrono::Months::new(1))
                .unwrap_or(first),
            Period::Year => first
                .checked_add_months(chrono::Months::new(12))
                .unwrap_or(first),
        }
    }

    /// When the period `now` is in began, in the time zone of `now`.
    pub fn start<Tz: TimeZone>(self, now: &DateTime<Tz>) -> DateTime<Tz> {
        midnight(&now.timezone(), self.first_day(now.date_naive()))
    }

    /// When the period `now` is in ends (the next one begins).
    pub fn end<Tz: TimeZone>(self, now: &DateTime<Tz>) -> DateTime<Tz> {
        let first = self.first_day(now.date_naive());
        midnight(&now.timezone(), self.next_first_day(first))
    }
}

/// The start of `day` in `tz`: midnight, or the first moment of the day where a
/// daylight-saving change skips midnight.
fn midnight<Tz: TimeZone>(tz: &Tz, day: NaiveDate) -> DateTime<Tz> {
    let mut at = day.and_hms_opt(0, 0, 0).unwrap_or_default();
    for _ in 0..4 {
        if let Some(t) = tz.from_local_datetime(&at).earliest() {
            return t;
        }
        at += Duration::minutes(30);
    }
    tz.from_utc_datetime(&day.and_hms_opt(0, 0, 0).unwrap_or_default())
}

/// The clock the rules read: the box's, in its time zone (plus [`CLOCK_OFFSET_ENV`]).
pub fn now() -> DateTime<Local> {
    Local::now() + Duration::seconds(clock_offset())
}

/// [`CLOCK_OFFSET_ENV`], read once.
pub fn clock_offset() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(|| {
        std::env::var(CLOCK_OFFSET_ENV)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    })
}

pub(super) fn micros<Tz: TimeZone>(t: &DateTime<Tz>) -> u64 {
    u64::try_from(t.timestamp_micros()).unwrap_or(0)
}

/// The owner's household settings (`[household]` of `berth.toml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// How long a payment held for approval waits for the owner.
    pub approval_expiry: StdDuration,
    /// The rules a newly paired device starts with (`None`: none).
    pub new_device_rules: Option<Rules>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            approval_expiry: approvals::DEFAULT_EXPIRY,
            new_device_rules: None,
        }
    }
}

/// One budget as the owner sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub amount: Amount,
    pub period: Period,
}

/// What happens to a payment over a device's per-payment maximum or a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverLimit {
    /// Refused (403).
    #[default]
    Refuse,
    /// Held for the owner's approval (202, [`approvals`]).
    Approve,
}

impl OverLimit {
    pub fn as_str(self) -> &'static str {
        match self {
            OverLimit::Refuse => "refuse",
            OverLimit::Approve => "approve",
        }
    }

    pub fn parse(s: &str) -> Option<OverLimit> {
        [OverLimit::Refuse, OverLimit::Approve]
            .into_iter()
            .find(|o| o.as_str() == s)
    }
}

/// A device's rules as the owner sets them. Absent limits are no limits (the default:
/// no limit at all).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rules {
    pub max_payment: Option<Amount>,
    pub budgets: Vec<Budget>,
    /// `None`: every kind.
    pub kinds: Option<Vec<PaymentKind>>,
    /// The most a payment's fee may be, as the wallet estimates it just before paying.
    pub max_fee: Option<Amount>,
    pub over_limit: OverLimit,
    /// The device sees only its own payments (the history, the exports, the movement
    /// events): household members need not see each other's spending.
    pub own_history: bool,
}

impl Rules {
    /// Rules from the form the owner writes them in (the API's JSON, `berth.toml`):
    /// `budgets` as (sats, period name). Every field is optional; the error names the
    /// field that is wrong. (Limits between fields are checked when they are set.)
    pub fn parse(
        max_payment_sat: Option<u64>,
        budgets: &[(u64, &str)],
        kinds: Option<&[String]>,
        max_fee_sat: Option<u64>,
        over_limit: Option<&str>,
    ) -> Result<Rules, String> {
        let sat = |field: &str, sats: u64| {
            if sats > Amount::MAX_MONEY.to_sat() {
                Err(format!("{field}: {sats} is more than there can be bitcoin"))
            } else {
                Ok(Amount::from_sat(sats))
            }
        };
        let over_limit = match over_limit {
            None => OverLimit::default(),
            Some(o) => OverLimit::parse(o)
                .ok_or_else(|| format!("over_limit: {o:?}; refuse or approve"))?,
        };
        let budgets = budgets
            .iter()
            .map(|&(amount, period)| {
                Ok(Budget {
                    amount: sat("budgets: amount_sat", amount)?,
                    period: Period::parse(period).ok_or_else(|| {
                        format!("budgets: period {period:?}; one of day, week, month, year")
                    })?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let kinds = kinds
            .map(|names| {
                names
                    .iter()
                    .map(|k| {
                        PaymentKind::parse(k).ok_or_else(|| {
                            format!("kinds: {k:?}; of ark, lightning, onchain, offboard, exit")
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()
            })
            .transpose()?;
        Ok(Rules {
            max_payment: max_payment_sat
                .map(|s| sat("max_payment_sat", s))
                .transpose()?,
            budgets,
            kinds,
            max_fee: max_fee_sat.map(|s| sat("max_fee_sat", s)).transpose()?,
            over_limit,
            own_history: false,
        })
    }

    /// The `history` setting's form: `all` (or absent) or `own`; `true` for `own`.
    pub fn own_history_of(history: Option<&str>) -> Result<bool, String> {
        match history {
            None | Some("all") => Ok(false),
            Some("own") => Ok(true),
            Some(other) => Err(format!("history: {other:?}; all or own")),
        }
    }

    /// What is wrong with these rules as a whole, if anything.
    pub fn check(&self) -> Result<(), String> {
        if self.budgets.len() > MAX_BUDGETS {
            return Err(format!("budgets: at most {MAX_BUDGETS}"));
        }
        for (i, b) in self.budgets.iter().enumerate() {
            if b.amount == Amount::ZERO {
                return Err(
                    "budgets: amount_sat must be above 0 (to forbid a kind of payment, \
                     leave it out of kinds)"
                        .into(),
                );
            }
            if self.budgets[..i].iter().any(|o| o.period == b.period) {
                return Err(format!(
                    "budgets: one budget per period ({} twice)",
                    b.period.as_str()
                ));
            }
        }
        if self.max_payment == Some(Amount::ZERO) {
            return Err("max_payment_sat must be above 0".into());
        }
        if self.over_limit == OverLimit::Approve
            && self.max_payment.is_none()
            && self.budgets.is_empty()
        {
            return Err(
                "over_limit \"approve\" needs a limit to be over: set max_payment_sat or a budget"
                    .into(),
            );
        }
        Ok(())
    }
}

/// Where one budget stands now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetUse {
    pub budget: Budget,
    pub used: Amount,
    pub left: Amount,
    pub renews_at: DateTime<Local>,
}

/// A device's rules and where its budgets stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesView {
    pub rules: Rules,
    pub budgets: Vec<BudgetUse>,
}
