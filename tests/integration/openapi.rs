//! Berth's OpenAPI document: generated from the code, checked in as `docs/openapi.json`,
//! served at `/api-docs/openapi.json`, and compatible with barkd's 0.6.0 document under
//! the rules of `docs/barkd-compatibility.md` (`openapi_compat`).
//!
//! After an API change, regenerate the checked-in copy with
//! `BERTH_BLESS=1 cargo test --test integration openapi::`.

use crate::harness;
mod openapi_compat;

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

use openapi_compat::{Doc, OpKey, Shape, accepts, compare_operation, provides};

fn repo_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn generated() -> String {
    let mut json = berth::api::openapi()
        .to_pretty_json()
        .expect("the document serialises");
    json.push('\n');
    json
}

fn barkd() -> Value {
    // barkd's published document, version 0.6.0 (docs/barkd-compatibility.md).
    let path = repo_file("tests/fixtures/barkd-openapi-0.6.0.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("barkd's OpenAPI document at {}: {e}", path.display()));
    serde_json::from_str(&text).expect("barkd's document is JSON")
}

/// Every difference between ours and barkd's, and barkd's operations we lack.
fn differences(ours: &Value, theirs: &Value) -> (Vec<String>, BTreeSet<OpKey>) {
    let (ours_doc, theirs_doc) = (Doc::new(ours), Doc::new(theirs));
    let ours_ops = ours_doc.operations();
    let mut errors = Vec::new();
    let mut missing = BTreeSet::new();
    for (key, theirs_op) in theirs_doc.operations() {
        match ours_ops.get(&key) {
            Some(ours_op) => errors.extend(compare_operation(
                &ours_doc,
                ours_op,
                &theirs_doc,
                theirs_op,
                &format!("{} {}", key.0, key.1),
            )),
            None => {
                missing.insert(key);
            }
        }
    }
    (errors, missing)
}

#[test]
fn checked_in_document_is_current() {
    let path = repo_file("docs/openapi.json");
    let current = generated();
    if std::env::var_os("BERTH_BLESS").is_some() {
        std::fs::write(&path, &current).expect("write docs/openapi.json");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == current,
        "docs/openapi.json is not what the code generates; run \
         `BERTH_BLESS=1 cargo test --test integration openapi::` and commit the result"
    );
}

#[test]
fn document_is_compatible_with_barkd() {
    let ours: Value = serde_json::from_str(&generated()).expect("JSON");
    let theirs = barkd();
    let (errors, missing) = differences(&ours, &theirs);
    assert!(
        errors.is_empty(),
        "incompatible with barkd 0.6.0:\n  {}",
        errors.join("\n  ")
    );

    // Every barkd operation is served, and serving one means documenting it.
    assert!(
        missing.is_empty(),
        "barkd operations missing from our document: {missing:?}"
    );
    let theirs_count = Doc::new(&theirs).operations().len();
    assert_eq!(theirs_count, 74, "barkd 0.6.0 has 74 operations");
    eprintln!(
        "barkd operations documented and compatible: {} of {theirs_count}; not yet served: {}",
        theirs_count - missing.len(),
        missing.len()
    );
}

/// The checker must catch each kind of difference it exists for; otherwise an empty
/// error list above would prove nothing.
#[test]
fn compatibility_check_catches_differences() {
    let theirs = barkd();
    let ours: Value = serde_json::from_str(&generated()).expect("JSON");
    type Mutation = (&'static str, &'static str, fn(&mut Value));
    let mutations: &[Mutation] = &[
        ("a renamed request field", "network: missing in ours", |d| {
            let props = &mut schema(d, "CreateWalletRequest")["properties"];
            let network = props["network"].take();
            props
                .as_object_mut()
                .expect("our document has this shape")
                .remove("network");
            props["netwrk"] = network;
        }),
        (
            "a request field made required",
            "mnemonic: required in ours only",
            |d| {
                schema(d, "CreateWalletRequest")["required"]
                    .as_array_mut()
                    .expect("our document has this shape")
                    .push("mnemonic".into());
            },
        ),
        ("a missing enum value", "does not accept", |d| {
            schema(d, "BarkNetwork")["enum"]
                .as_array_mut()
                .expect("our document has this shape")
                .retain(|v| v != "mutinynet");
        }),
        (
            "a missing union variant",
            "no variant of ours accepts",
            |d| {
                schema(d, "ChainSourceConfig")["oneOf"]
                    .as_array_mut()
                    .expect("our document has this shape")
                    .pop();
            },
        ),
        (
            "a response field of another type",
            "ours is integer, theirs is string",
            |d| {
                schema(d, "CreateWalletResponse")["properties"]["fingerprint"] =
                    serde_json::json!({"type": "integer"});
            },
        ),
        (
            "a response field no longer required",
            "theirs always sends it",
            |d| {
                schema(d, "ConnectedResponse")["required"] = serde_json::json!([]);
            },
        ),
        (
            "a request body dropped",
            "ours takes no JSON request body",
            |d| {
                d["paths"]["/api/v1/wallet"]["delete"]
                    .as_object_mut()
                    .expect("our document has this shape")
                    .remove("requestBody");
            },
        ),
    ];
    for (what, expected, mutate) in mutations {
        let mut mutated = ours.clone();
        mutate(&mut mutated);
        let (errors, _) = differences(&mutated, &theirs);
        assert!(
            errors.iter().any(|e| e.contains(expected)),
            "{what}: expected an error containing {expected:?}, got {errors:?}"
        );
    }

    // And the direction of each rule: a response may say more, a request may accept more.
    let narrow = Shape::String(Some(["a".to_string()].into()));
    let wide = Shape::String(None);
    let mut errors = Vec::new();
    provides(&narrow, &wide, "narrow response", &mut errors);
    accepts(&wide, &narrow, "wide request", &mut errors);
    assert!(errors.is_empty(), "{errors:?}");
    provides(&wide, &narrow, "wide response", &mut errors);
    accepts(&narrow, &wide, "narrow request", &mut errors);
    assert_eq!(errors.len(), 2, "{errors:?}");

    // A response may carry bark 0.8's documented additions, and nothing else new.
    let theirs = Shape::String(Some(["start".to_string()].into()));
    let with = |extra: &str| Shape::String(Some(["start".to_string(), extra.to_string()].into()));
    let mut errors = Vec::new();
    provides(
        &with("vtxo-swept"),
        &theirs,
        "bark 0.8 addition",
        &mut errors,
    );
    assert!(errors.is_empty(), "{errors:?}");
    provides(&with("made-up"), &theirs, "unknown addition", &mut errors);
    assert_eq!(errors.len(), 1, "{errors:?}");
}

fn schema<'a>(doc: &'a mut Value, name: &str) -> &'a mut Value {
    &mut doc["components"]["schemas"][name]
}

#[test]
fn daemon_serves_the_document_without_a_credential() {
    let (_tmp, datadir) = harness::new_datadir();
    let daemon = harness::Daemon::start(&datadir, &[]);
    let (status, raw) = daemon.get("/api-docs/openapi.json", &[]);
    assert_eq!(status, 200, "{raw}");
    let served = harness::json_of(&raw);
    let expected: Value = serde_json::from_str(&generated()).expect("JSON");
    // berthd serves the checked-in copy it was built with (build.rs): right after a
    // BERTH_BLESS run rewrote that copy, this fails until the daemon is built again.
    assert!(
        served == expected,
        "the served document is not the generated one (after BERTH_BLESS=1, run the tests \
         again: the daemon is rebuilt with the new docs/openapi.json)"
    );
}

#[test]
fn every_fund_moving_operation_documents_the_idempotency_key() {
    let ours: Value = serde_json::from_str(&generated()).expect("JSON");
    let table = berth::api::route_table();
    let moving: Vec<&str> = table.fund_moving().map(|r| r.path.as_str()).collect();
    assert_eq!(moving.len(), 18, "{moving:?}");
    for path in moving {
        let op = &ours["paths"][path]["post"];
        assert!(op.is_object(), "{path} is a documented POST");
        let documented = op["parameters"].as_array().is_some_and(|ps| {
            ps.iter()
                .any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header")
        });
        assert!(documented, "{path} documents Idempotency-Key");
        assert!(op["responses"]["409"].is_object(), "{path} documents 409");
    }
}

#[test]
fn every_operation_documents_what_the_layers_before_its_handler_answer() {
    use berth::api::routes::Access;
    let ours: Value = serde_json::from_str(&generated()).expect("JSON");
    let table = berth::api::route_table();
    let mut behind_token = 0;
    for route in table.iter() {
        let op = &ours["paths"][&route.path][route.method.as_str().to_lowercase()];
        assert!(
            op.is_object(),
            "{} {} is documented",
            route.method,
            route.path
        );
        let documents = |status: &str| op["responses"][status].is_object();
        if let Access::Scoped { moves_funds, .. } = route.access {
            behind_token += 1;
            for status in ["401", "403", "429"] {
                assert!(
                    documents(status),
                    "{} {} documents the bearer check's {status}",
                    route.method,
                    route.path
                );
            }
            if moves_funds {
                for status in ["400", "409", "422"] {
                    assert!(
                        documents(status),
                        "{} {} documents the idempotency layer's {status}",
                        route.method,
                        route.path
                    );
                }
            }
        }
        if op["requestBody"].is_object() {
            assert!(
                documents("413"),
                "{} {} documents 413",
                route.method,
                route.path
            );
        }
    }
    // `/metrics` is behind the token too, outside `/api/`.
    assert!(ours["paths"]["/metrics"]["get"]["responses"]["403"].is_object());
    assert!(
        behind_token > 70,
        "{behind_token} operations behind the token"
    );
}

/// A description is Markdown for a client's developer (a doc comment's line breaks are
/// fine there), but a backslash or an indented line in it is a string continuation gone
/// wrong in the code: `\\` at a line's end keeps the backslash and the next line's
/// indentation, which Markdown then shows as a stray `\` or a code block.
#[test]
fn descriptions_carry_no_stray_backslashes_or_indentation() {
    fn walk(value: &Value, at: &str, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, v) in map {
                    let here = format!("{at}/{key}");
                    if let ("description" | "summary", Value::String(text)) = (key.as_str(), v)
                        && (text.contains('\\') || text.contains("\n "))
                    {
                        found.push(format!("{here}: {text:?}"));
                    }
                    walk(v, &here, found);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &format!("{at}/{i}"), found);
                }
            }
            _ => {}
        }
    }
    let doc: Value = serde_json::from_str(&generated()).expect("JSON");
    let mut found = Vec::new();
    walk(&doc, "", &mut found);
    assert!(found.is_empty(), "{}", found.join("\n"));
}
