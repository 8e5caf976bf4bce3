//! Differential test: random operation sequences applied to our redb store and to
//! bark's public in-memory persister (`StorageAdaptorWrapper<MemoryStorageAdaptor>`).
//! After every operation both must have answered alike (both `Ok` or both `Err`) and
//! every read must agree.

use crate::common;

use bark::persist::adaptor::StorageAdaptorWrapper;
use bark::persist::adaptor::memory::MemoryStorageAdaptor;
use common::ops::{Op, POOL, apply, op_strategy, prologue, snapshot};
use proptest::prelude::*;

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (_dir, ours) = common::fresh_store();
        let reference = StorageAdaptorWrapper::new(MemoryStorageAdaptor::new());
        prologue(&ours).await;
        prologue(&reference).await;
        for (i, op) in ops.iter().enumerate() {
            let a = apply(&ours, op, &POOL).await;
            let b = apply(&reference, op, &POOL).await;
            prop_assert_eq!(
                a.is_ok(),
                b.is_ok(),
                "op {} {:?}: ours {:?}, bark {:?}",
                i,
                op,
                a,
                b
            );
            let (sa, sb) = (
                snapshot(&ours, &POOL).await,
                snapshot(&reference, &POOL).await,
            );
            prop_assert_eq!(sa, sb, "reads disagree after op {} {:?}", i, op);
        }
        ours.verify_invariants()
            .await
            .map_err(|e| TestCaseError::fail(format!("invariants: {e}")))?;
        Ok(())
    })
}

proptest! {
    // 48 sequences in CI; `BERTH_DIFF_CASES=1000 scripts/test` for a long run.
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("BERTH_DIFF_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48)
    ))]

    #[test]
    fn store_agrees_with_bark_memory_persister(ops in prop::collection::vec(op_strategy(), 1..40)) {
        run(ops)?;
    }
}
