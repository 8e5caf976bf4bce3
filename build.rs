//! The OpenAPI document berthd serves at `/api-docs/openapi.json` is the checked-in
//! `docs/openapi.json` (which `tests/integration/openapi.rs` proves equal to what the
//! code generates), compressed here with zstd into the binary: 36 KB, where the code
//! that describes every operation and schema (`api::routes`' `Documenting`, utoipa's
//! builders, the descriptions' text) took 1.87 MB of the stripped x86_64 binary when
//! berthd made the document itself (issue 45, the binary's size). zstd's decoder is in
//! berthd already (bark's gRPC client, `zstd-sys` in Cargo.toml).

use std::path::PathBuf;

fn main() {
    let source = "docs/openapi.json";
    println!("cargo::rerun-if-changed={source}");
    let document = std::fs::read(source).unwrap_or_else(|e| panic!("reading {source}: {e}"));
    let compressed =
        zstd::bulk::compress(&document, 19).unwrap_or_else(|e| panic!("compressing {source}: {e}"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let path = out.join("openapi.json.zst");
    std::fs::write(&path, compressed).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}
