//! The integration tests that need no regtest stack, in one test binary (each binary
//! links the whole crate; docs/testing.md has what one instead of 26 saves). A file per
//! subject, each a module here (`cargo test --test integration <file>::`). The
//! scenarios that need the stack are the `e2e` binary.

#[path = "../common/mod.rs"]
mod common;
#[path = "../harness/mod.rs"]
mod harness;

mod access;
mod api_contract;
mod approvals;
mod backup;
mod balance_differential;
mod browser;
mod claim;
mod configuration;
mod console;
mod console_history;
mod daemon;
mod daemon_backups;
mod daemon_wallet;
mod disk_faults;
mod egress;
mod export;
mod files;
mod headless;
mod lan;
mod notifications;
mod nwc;
mod openapi;
mod pagination;
mod provision;
mod seed;
mod spending;
mod store_behaviour;
mod store_crash;
mod store_differential;
mod store_migration;
mod system_update;
mod systemd;
mod webhooks;
