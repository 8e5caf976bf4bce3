//! Scopes: what a credential may do.
//!
//! Four scopes, `read`, `receive`, `send` and `admin`. They do not imply each other,
//! except `admin`, which includes all. A route needs exactly one (declared with the
//! route, `api::routes`; checked after routing by `api::scopes`). The barkd-style
//! `auth_token` (and `--no-auth`) carries [`Scopes::FULL`]; a device token carries the
//! scopes chosen when its pairing window was opened, stored as [`Scopes::bits`].

/// What a credential may do. A route needs exactly one scope (`api::scopes`);
/// `admin` includes every other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Balances, history, VTXOs, exits' status, fees, events.
    Read,
    /// New addresses and invoices.
    Receive,
    /// Anything that spends or moves funds: payments, boards, refreshes, offboards,
    /// exits, message signing.
    Send,
    /// Wallet creation and deletion, the mnemonic, devices.
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Receive, Scope::Send, Scope::Admin];

    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Receive => "receive",
            Scope::Send => "send",
            Scope::Admin => "admin",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Scope::Read => 1,
            Scope::Receive => 2,
            Scope::Send => 4,
            Scope::Admin => 8,
        }
    }
}

/// A set of scopes, stored as a bit set.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Scopes(u8);

impl Scopes {
    /// Nothing at all.
    pub const NONE: Scopes = Scopes(0);
    /// What the barkd-style `auth_token` (and `--no-auth`) grants.
    pub const FULL: Scopes = Scopes(15);
    /// What `berthd pair` grants unless told otherwise: a phone wallet reads, receives
    /// and pays, but cannot delete the wallet, read the mnemonic or manage devices.
    pub const PHONE_WALLET: Scopes = Scopes(1 | 2 | 4);

    pub fn bits(self) -> u8 {
        self.0
    }

    /// The scopes of stored bits; unknown bits (from a newer version) are dropped.
    pub fn from_bits(bits: u8) -> Scopes {
        Scopes(bits & Scopes::FULL.0)
    }

    /// Whether a holder of these scopes may use a route that needs `scope`.
    pub fn allows(self, scope: Scope) -> bool {
        self.0 & Scope::Admin.bit() != 0 || self.0 & scope.bit() != 0
    }

    /// Parse names such as `["read", "receive"]`; at least one, no unknown ones.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Scopes, String> {
        let mut bits = 0;
        for name in names {
            let name = name.as_ref().trim();
            let scope = Scope::ALL
                .into_iter()
                .find(|s| s.name() == name)
                .ok_or_else(|| {
                    format!("unknown scope {name:?} (expected read, receive, send or admin)")
                })?;
            bits |= scope.bit();
        }
        if bits == 0 {
            return Err("at least one scope is needed".into());
        }
        Ok(Scopes(bits))
    }

    pub fn names(self) -> Vec<&'static str> {
        Scope::ALL
            .into_iter()
            .filter(|s| self.0 & s.bit() != 0)
            .map(Scope::name)
            .collect()
    }
}

impl std::fmt::Debug for Scopes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.names().join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_parse_print_and_admin_includes_all() {
        let s = Scopes::parse(&["read", " send"]).expect("parse");
        assert_eq!(s.names(), vec!["read", "send"]);
        assert!(s.allows(Scope::Read) && s.allows(Scope::Send));
        assert!(!s.allows(Scope::Receive) && !s.allows(Scope::Admin));
        let admin = Scopes::parse(&["admin"]).expect("admin");
        assert!(Scope::ALL.into_iter().all(|x| admin.allows(x)));
        assert!(Scopes::parse::<&str>(&[]).is_err());
        assert!(
            Scopes::parse(&["write"])
                .expect_err("unknown")
                .contains("write")
        );
        assert_eq!(Scopes::from_bits(0xff), Scopes::FULL);
        assert!(!Scopes::PHONE_WALLET.allows(Scope::Admin));
    }
}
