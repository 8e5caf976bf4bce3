//! Real, signed VTXOs for tests and benches, built with ark's board builder.
//!
//! Each VTXO is a board of a distinct amount, so each has its own funding txid and
//! therefore its own id. Building one signs a MuSig2 board, so pools are built once
//! per process and shared.

use ark::Vtxo;
use ark::test_util::dummy::DummyTestVtxoSpec;
use ark::vtxo::Full;
use bitcoin::Amount;
use bitcoin_ext::{BlockDelta, BlockHeight};

/// `n` distinct VTXOs: every amount differs (so every funding txid and id does) and
/// expiry heights cycle through five values, so orderings by (expiry, amount) matter.
pub fn vtxo_pool(n: usize) -> Vec<Vtxo<Full>> {
    (0..n)
        .map(|i| {
            let i = i as u64;
            DummyTestVtxoSpec {
                amount: Amount::from_sat(10_000 + i),
                fee: Amount::from_sat(330),
                expiry_height: BlockHeight::new(1_000 + (i % 5) as u32 * 100),
                exit_delta: BlockDelta::new(144),
                ..Default::default()
            }
            .build()
            .1
        })
        .collect()
}
