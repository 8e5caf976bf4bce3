//! `barkd-fill <datadir>/db.sqlite`: put the benches' big wallet (10,000 movements,
//! 2,000 VTXOs) into a barkd wallet database, through bark's own SQLite persister. barkd
//! must be stopped.

#[path = "../../../tests/common/big_wallet.rs"]
mod big_wallet;
#[path = "../../../tests/common/vtxos.rs"]
mod vtxos;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: barkd-fill <barkd datadir>/db.sqlite");
    let db = bark::persist::sqlite::SqliteClient::open(&path).expect("open barkd's database");
    big_wallet::fill(&db).await;
}
