//! Store benchmarks: Berth's redb store against bark's in-memory persister, through the
//! same `bark::persist::BarkPersister` calls the wallet makes.
//!
//! Backends (criterion function names):
//! - `berth_redb`: `berth::store::Store` on a file in a fresh temporary directory. Every
//!   write call is one redb write transaction committed with `Durability::Immediate`,
//!   so each write pays for a durable commit (its fsyncs) before it returns. The number
//!   of fsyncs per commit is redb's business and is not counted here.
//! - `bark_memory`: `StorageAdaptorWrapper<MemoryStorageAdaptor>`, bark's public
//!   in-memory persister: no encoding to disk, no durability. It is the floor, not a
//!   competitor; the ratios show what durability and our encodings cost per call.
//!
//! Operations (criterion group names):
//! - `store_vtxos_1`, `store_vtxos_100`: store 1 or 100 VTXOs the store has not seen.
//!   VTXOs come from one pool of 10,000 distinct VTXOs (`distinct_vtxos`), built once;
//!   when a store has received the whole pool it is replaced by a fresh one, outside the
//!   timed region.
//! - `get_all_vtxos_10k`, `get_vtxos_by_state_10k`: list 10,000 stored VTXOs (all
//!   `Spendable`), all of them or those in `Spendable`.
//! - `create_update_movement`: `create_new_movement`, then `update_movement` setting the
//!   status to `Successful` with one `received_on` destination (two writes).
//! - `get_all_movements_10k`: list 10,000 movements made that way.
//!
//! After criterion has run, one line per operation prints the mean time per call of each
//! backend and `ratio <op>: berth/bark = X.XX`. These means are our own timing: every
//! iteration criterion asked for (warm-up included) is timed with `Instant` and summed.
//!
//! Run with `cargo bench --bench store` (`-- --quick` for a shorter run). A full run takes
//! about 2.5 minutes after compiling, a minute of it setup: building the VTXOs (signing)
//! and storing 10,000 movements in the redb store (two durable commits each). When the
//! binary is not benchmarking (`cargo test --benches`, `--list`), sizes shrink so the
//! smoke run stays fast in debug builds.

#[path = "../tests/common/vtxos.rs"]
mod vtxos;

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ark::Vtxo;
use ark::vtxo::Full;
use bark::movement::{
    Movement, MovementDestination, MovementStatus, MovementSubsystem, PaymentMethod,
};
use bark::persist::BarkPersister;
use bark::persist::adaptor::StorageAdaptorWrapper;
use bark::persist::adaptor::memory::MemoryStorageAdaptor;
use bark::vtxo::{VtxoState, VtxoStateKind};
use berth::store::{Store, StoreConfig};
use bitcoin::Amount;
use chrono::Local;
use criterion::{BenchmarkGroup, Criterion, measurement::WallTime};
use tempfile::TempDir;
use tokio::runtime::Runtime;

/// Stored VTXOs and movements for the listing benchmarks (and the VTXO pool size).
const LISTED: usize = 10_000;
/// The same, when the binary only smoke-tests the benchmarks.
const LISTED_SMOKE: usize = 200;

const STORE_VTXOS_1: &str = "store_vtxos_1";
const STORE_VTXOS_100: &str = "store_vtxos_100";
const GET_ALL_VTXOS: &str = "get_all_vtxos_10k";
const GET_VTXOS_BY_STATE: &str = "get_vtxos_by_state_10k";
const CREATE_UPDATE_MOVEMENT: &str = "create_update_movement";
const GET_ALL_MOVEMENTS: &str = "get_all_movements_10k";

/// Report order.
const OPS: [&str; 6] = [
    STORE_VTXOS_1,
    STORE_VTXOS_100,
    GET_ALL_VTXOS,
    GET_VTXOS_BY_STATE,
    CREATE_UPDATE_MOVEMENT,
    GET_ALL_MOVEMENTS,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Backend {
    Berth,
    Bark,
}

impl Backend {
    const ALL: [Backend; 2] = [Backend::Berth, Backend::Bark];

    fn name(self) -> &'static str {
        match self {
            Backend::Berth => "berth_redb",
            Backend::Bark => "bark_memory",
        }
    }
}

/// One persister of one backend. Fields drop in order: the database closes before its
/// directory is removed.
struct Instance {
    persister: Box<dyn BarkPersister>,
    _dir: Option<TempDir>,
}

impl Instance {
    fn new(backend: Backend) -> Instance {
        match backend {
            Backend::Berth => {
                let dir = tempfile::tempdir().expect("creating a temporary directory");
                let (store, _report) =
                    Store::open(&dir.path().join("wallet.redb"), &StoreConfig::default())
                        .expect("opening the berth store");
                Instance {
                    persister: Box::new(store),
                    _dir: Some(dir),
                }
            }
            Backend::Bark => Instance {
                persister: Box::new(StorageAdaptorWrapper::new(MemoryStorageAdaptor::new())),
                _dir: None,
            },
        }
    }

    fn p(&self) -> &dyn BarkPersister {
        self.persister.as_ref()
    }
}

/// Total time and iterations of one (operation, backend).
type Timing = (Duration, u64);

/// Our own timing, per (operation, backend).
static TIMINGS: Mutex<BTreeMap<(&str, Backend), Timing>> = Mutex::new(BTreeMap::new());

fn record(op: &'static str, backend: Backend, elapsed: Duration, iters: u64) {
    let mut timings = TIMINGS.lock().expect("timings lock");
    let entry = timings.entry((op, backend)).or_default();
    entry.0 += elapsed;
    entry.1 += iters;
}

fn mean(op: &str, backend: Backend) -> Option<Duration> {
    let timings = TIMINGS.lock().expect("timings lock");
    let &(total, iters) = timings.get(&(op, backend))?;
    let iters = u32::try_from(iters).ok().filter(|&n| n > 0)?;
    Some(total / iters)
}

/// `n` VTXOs with distinct ids (checked: listings must count exactly `n`).
fn distinct_vtxos(n: usize) -> Vec<Vtxo<Full>> {
    let out = vtxos::vtxo_pool(n);
    let ids: HashSet<_> = out.iter().map(|v| v.id()).collect();
    assert_eq!(ids.len(), n, "the VTXO pool repeats ids");
    out
}

fn subsystem() -> MovementSubsystem {
    MovementSubsystem {
        name: "bench".into(),
        kind: "receive".into(),
    }
}

/// `create_new_movement`, then `update_movement` to `Successful` with one destination.
async fn create_and_update_movement(p: &dyn BarkPersister, subsystem: &MovementSubsystem) {
    let created = Local::now();
    let id = p
        .create_new_movement(MovementStatus::Pending, subsystem, created, None)
        .await
        .expect("create_new_movement");
    let mut movement = Movement::new(id, MovementStatus::Successful, subsystem, created);
    let done = Local::now();
    movement.time.updated_at = done;
    movement.time.completed_at = Some(done);
    movement.received_on.push(MovementDestination::new(
        PaymentMethod::Custom("bench".into()),
        Amount::from_sat(21_000),
    ));
    p.update_movement(&movement).await.expect("update_movement");
}

/// Store `batch` new VTXOs per iteration, taken in turn from `pool`.
fn bench_store_vtxos(
    group: &mut BenchmarkGroup<'_, WallTime>,
    rt: &Runtime,
    op: &'static str,
    pool: &[Vtxo<Full>],
    batch: usize,
) {
    let spendable = VtxoState::Spendable;
    for backend in Backend::ALL {
        group.bench_function(backend.name(), |b| {
            let mut instance = Instance::new(backend);
            let mut next = 0;
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    if next + batch > pool.len() {
                        // Every pool VTXO is in this store: start over on an empty one.
                        instance = Instance::new(backend);
                        next = 0;
                    }
                    let items: Vec<(&Vtxo<Full>, &VtxoState)> = pool[next..next + batch]
                        .iter()
                        .map(|v| (v, &spendable))
                        .collect();
                    next += batch;
                    let start = Instant::now();
                    rt.block_on(instance.p().store_vtxos(&items))
                        .expect("store_vtxos");
                    total += start.elapsed();
                }
                record(op, backend, total, iters);
                total
            });
        });
    }
}

/// Time `run` on each backend's prepared instance; `run` returns how many items it got,
/// which must be `expect`.
fn bench_listing(
    group: &mut BenchmarkGroup<'_, WallTime>,
    op: &'static str,
    instances: &[(Backend, Instance)],
    expect: usize,
    run: impl Fn(&dyn BarkPersister) -> usize,
) {
    for (backend, instance) in instances {
        let backend = *backend;
        group.bench_function(backend.name(), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let got = run(instance.p());
                    total += start.elapsed();
                    assert_eq!(
                        got,
                        expect,
                        "{op} on {} returned a wrong count",
                        backend.name()
                    );
                }
                record(op, backend, total, iters);
                total
            });
        });
    }
}

fn benches(c: &mut Criterion, rt: &Runtime, listed: usize) {
    let start = Instant::now();
    let pool = distinct_vtxos(listed);
    println!(
        "built {} distinct vtxos in {:.1?}",
        pool.len(),
        start.elapsed()
    );

    for (op, batch) in [(STORE_VTXOS_1, 1), (STORE_VTXOS_100, 100)] {
        let mut group = c.benchmark_group(op);
        bench_store_vtxos(&mut group, rt, op, &pool, batch);
        group.finish();
    }

    // One store per backend holding the whole pool, all Spendable, in one call.
    let start = Instant::now();
    let spendable = VtxoState::Spendable;
    let items: Vec<(&Vtxo<Full>, &VtxoState)> = pool.iter().map(|v| (v, &spendable)).collect();
    let with_vtxos: Vec<(Backend, Instance)> = Backend::ALL
        .into_iter()
        .map(|backend| {
            let instance = Instance::new(backend);
            rt.block_on(instance.p().store_vtxos(&items))
                .expect("filling a store with vtxos");
            (backend, instance)
        })
        .collect();
    println!(
        "stored {} vtxos in each backend in {:.1?}",
        pool.len(),
        start.elapsed()
    );

    let mut group = c.benchmark_group(GET_ALL_VTXOS);
    bench_listing(&mut group, GET_ALL_VTXOS, &with_vtxos, pool.len(), |p| {
        rt.block_on(p.get_all_vtxos()).expect("get_all_vtxos").len()
    });
    group.finish();

    let mut group = c.benchmark_group(GET_VTXOS_BY_STATE);
    bench_listing(
        &mut group,
        GET_VTXOS_BY_STATE,
        &with_vtxos,
        pool.len(),
        |p| {
            rt.block_on(p.get_vtxos_by_state(&[VtxoStateKind::Spendable]))
                .expect("get_vtxos_by_state")
                .len()
        },
    );
    group.finish();
    drop(with_vtxos);

    let subsystem = subsystem();
    let mut group = c.benchmark_group(CREATE_UPDATE_MOVEMENT);
    for backend in Backend::ALL {
        group.bench_function(backend.name(), |b| {
            let instance = Instance::new(backend);
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    rt.block_on(create_and_update_movement(instance.p(), &subsystem));
                }
                let total = start.elapsed();
                record(CREATE_UPDATE_MOVEMENT, backend, total, iters);
                total
            });
        });
    }
    group.finish();

    // One store per backend with `listed` movements, each created and updated as above.
    let start = Instant::now();
    let with_movements: Vec<(Backend, Instance)> = Backend::ALL
        .into_iter()
        .map(|backend| {
            let instance = Instance::new(backend);
            rt.block_on(async {
                for _ in 0..listed {
                    create_and_update_movement(instance.p(), &subsystem).await;
                }
            });
            (backend, instance)
        })
        .collect();
    println!(
        "stored {listed} movements in each backend in {:.1?}",
        start.elapsed()
    );

    let mut group = c.benchmark_group(GET_ALL_MOVEMENTS);
    bench_listing(
        &mut group,
        GET_ALL_MOVEMENTS,
        &with_movements,
        listed,
        |p| {
            rt.block_on(p.get_all_movements())
                .expect("get_all_movements")
                .len()
        },
    );
    group.finish();
}

fn print_ratios() {
    println!();
    println!("mean per call, own timing (every iteration criterion ran, warm-up included):");
    for op in OPS {
        let (Some(berth), Some(bark)) = (mean(op, Backend::Berth), mean(op, Backend::Bark)) else {
            continue;
        };
        println!("{op}: berth_redb {berth:.2?}, bark_memory {bark:.2?}");
        println!(
            "ratio {op}: berth/bark = {:.2}",
            berth.as_secs_f64() / bark.as_secs_f64()
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    // Criterion benchmarks only under `cargo bench` (`--bench`) without `--test`/`--list`;
    // otherwise it runs each benchmark once as a test.
    let benchmarking = has("--bench") && !has("--test") && !has("--list");
    let listed = if benchmarking { LISTED } else { LISTED_SMOKE };

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("building the tokio runtime");
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .without_plots()
        .configure_from_args();
    benches(&mut c, &rt, listed);
    c.final_summary();
    print_ratios();
}
