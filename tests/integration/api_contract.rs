//! Every operation of our OpenAPI document, driven through the real `berthd` in the two
//! states a wallet appliance meets before anything works: no wallet yet, and a wallet
//! whose chain source and Ark server are unreachable (created, never loaded).
//!
//! - The contract: each operation exists, requires the bearer token, and answers one
//!   of its documented statuses with the documented shape (errors `{message, code}`,
//!   successes with their required fields).
//! - The bad-input matrix: malformed JSON, wrong types, missing required fields,
//!   negative and overflowing numbers, garbage path and query values, mainnet
//!   addresses on a regtest wallet — always a 4xx JSON answer, never a 5xx, and the
//!   wallet database unchanged afterwards.

use crate::harness;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use harness::*;

fn document() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("docs/openapi.json")).expect("JSON")
}

/// Follow a `$ref` (and `allOf` of one) to the schema it names.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or_default();
        return resolve(doc, &doc["components"]["schemas"][name]);
    }
    if let Some([one]) = schema
        .get("allOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        return resolve(doc, one);
    }
    schema
}

fn types_of(schema: &Value) -> Vec<String> {
    match &schema["type"] {
        Value::String(t) => vec![t.clone()],
        Value::Array(ts) => ts
            .iter()
            .filter_map(|t| t.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

/// A value of the schema's shape (not necessarily meaningful).
fn sample(doc: &Value, schema: &Value) -> Value {
    let schema = resolve(doc, schema);
    if let Some(variants) = schema.get("oneOf").and_then(Value::as_array)
        && let Some(first) = variants.first()
    {
        return sample(doc, first);
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && let Some(first) = values.first()
    {
        return first.clone();
    }
    let types = types_of(schema);
    let is = |t: &str| types.iter().any(|x| x == t);
    if is("object") || schema.get("properties").is_some() {
        let mut out = serde_json::Map::new();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(props) = schema["properties"].as_object() {
            for (name, prop) in props {
                if required.contains(&name.as_str()) {
                    out.insert(name.clone(), sample(doc, prop));
                }
            }
        }
        Value::Object(out)
    } else if is("integer") || is("number") {
        json!(1)
    } else if is("boolean") {
        json!(false)
    } else if is("array") {
        json!([])
    } else {
        json!("x")
    }
}

/// A path parameter value that parses (so the operation itself is reached).
fn path_value(name: &str, schema: &Value) -> String {
    if types_of(schema).iter().any(|t| t == "integer") {
        return "1".into();
    }
    match name {
        "identifier" => "11".repeat(32),
        // VTXO ids (and `/wallet/vtxos/{id}`).
        _ => format!("{}:0", "ab".repeat(32)),
    }
}

#[derive(Debug)]
struct Op {
    method: String,
    /// The path with `{name}` placeholders.
    template: String,
    path_params: Vec<(String, Value)>,
    query_params: Vec<(String, Value, bool)>,
    body: Option<Value>,
    /// Documented statuses, with the JSON schema of the body where there is one.
    responses: BTreeMap<u16, Option<Value>>,
    needs_token: bool,
    /// Documents an `Idempotency-Key` header.
    takes_idempotency_key: bool,
}

impl Op {
    fn path_with(&self, values: &BTreeMap<String, String>, query: &str) -> String {
        let mut path = self.template.clone();
        for (name, schema) in &self.path_params {
            let value = values
                .get(name)
                .cloned()
                .unwrap_or_else(|| path_value(name, schema));
            path = path.replace(&format!("{{{name}}}"), &value);
        }
        let mut query = query.to_string();
        // Long-polls answer at once here.
        if self.template.ends_with("/notifications/wait") {
            query = if query.is_empty() {
                "timeout=0".into()
            } else {
                format!("{query}&timeout=0")
            };
        }
        if query.is_empty() {
            path
        } else {
            format!("{path}?{query}")
        }
    }

    /// Query parameters that are required, with sample values.
    fn required_query(&self) -> String {
        self.query_params
            .iter()
            .filter(|(_, _, required)| *required)
            .map(|(name, schema, _)| format!("{name}={}", path_value(name, schema)))
            .collect::<Vec<_>>()
            .join("&")
    }
}

fn operations(doc: &Value) -> Vec<Op> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item") {
            if !["get", "post", "delete", "put", "patch"].contains(&method.as_str()) {
                continue;
            }
            // Streams: covered by tests/integration/notifications.rs.
            if path.ends_with("/notifications/sse") || path.ends_with("/notifications/ws") {
                continue;
            }
            let mut path_params = Vec::new();
            let mut query_params = Vec::new();
            let mut takes_idempotency_key = false;
            for p in op["parameters"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().expect("name").to_string();
                let schema = p["schema"].clone();
                match p["in"].as_str() {
                    Some("path") => path_params.push((name, schema)),
                    Some("query") => query_params.push((name, schema, p["required"] == true)),
                    Some("header") => takes_idempotency_key |= name == "Idempotency-Key",
                    _ => {}
                }
            }
            let body = op["requestBody"]["content"]
                .as_object()
                .and_then(|c| c.values().next())
                .map(|c| resolve(doc, &c["schema"]).clone());
            let responses = op["responses"]
                .as_object()
                .expect("responses")
                .iter()
                .map(|(code, r)| {
                    let schema = r["content"]["application/json"]["schema"].clone();
                    (
                        code.parse().expect("numeric status"),
                        (!schema.is_null()).then_some(schema),
                    )
                })
                .collect();
            let needs_token = !op["security"].as_array().is_some_and(|s| {
                s.iter()
                    .any(|x| x.as_object().is_some_and(|o| o.is_empty()))
            });
            ops.push(Op {
                method: method.to_uppercase(),
                template: path.clone(),
                path_params,
                query_params,
                body,
                responses,
                needs_token,
                takes_idempotency_key,
            });
        }
    }
    ops
}

struct Api<'a> {
    daemon: &'a Daemon,
    bearer: String,
}

impl Api<'_> {
    fn call(&self, method: &str, path: &str, body: Option<&str>, auth: bool) -> (u16, String) {
        let headers: Vec<(&str, &str)> = if auth {
            vec![("Authorization", self.bearer.as_str())]
        } else {
            Vec::new()
        };
        request(self.daemon.port, method, path, &headers, body)
    }
}

/// The answer matches the documented response for its status.
fn check_documented(doc: &Value, op: &Op, what: &str, status: u16, raw: &str) {
    let Some(schema) = op.responses.get(&status) else {
        panic!(
            "{} {}: {what}: status {status} is not documented ({:?}): {raw}",
            op.method,
            op.template,
            op.responses.keys().collect::<Vec<_>>()
        );
    };
    let body = body_of(raw);
    // An error status documented with a shape of its own (`/health`'s 503 is its
    // report) is checked like a success; every other error is `{message, code}`.
    let own_shape = schema.as_ref().is_some_and(|s| {
        resolve(doc, s)["properties"]
            .as_object()
            .is_some_and(|p| !p.contains_key("message"))
    });
    if status >= 400 && !own_shape {
        let value: Value = serde_json::from_str(body).unwrap_or_else(|e| {
            panic!(
                "{} {}: {what}: error body is not JSON ({e}): {raw}",
                op.method, op.template
            )
        });
        assert!(
            value["message"].is_string(),
            "{} {}: {what}: no message: {raw}",
            op.method,
            op.template
        );
        assert!(
            value["code"].is_string(),
            "{} {}: {what}: no code: {raw}",
            op.method,
            op.template
        );
        return;
    }
    if let Some(schema) = schema {
        let value: Value = serde_json::from_str(body).unwrap_or_else(|e| {
            panic!(
                "{} {}: {what}: body is not JSON ({e}): {raw}",
                op.method, op.template
            )
        });
        let schema = resolve(doc, schema);
        for field in schema["required"].as_array().into_iter().flatten() {
            let field = field.as_str().expect("name");
            assert!(
                value.get(field).is_some(),
                "{} {}: {what}: required field {field} missing: {raw}",
                op.method,
                op.template
            );
        }
    }
}

fn contract(doc: &Value, api: &Api, state: &str, allow_503: bool) {
    for op in operations(doc) {
        let path = op.path_with(&BTreeMap::new(), &op.required_query());
        let body = op.body.as_ref().map(|b| sample(doc, b).to_string());
        if op.needs_token {
            let (status, raw) = api.call(&op.method, &path, body.as_deref(), false);
            assert_eq!(status, 401, "{} {path} without a token: {raw}", op.method);
            check_documented(doc, &op, "without a token", status, &raw);
        }
        if op.takes_idempotency_key {
            // Over 255 characters: refused before the handler runs, whatever the state.
            let key = "k".repeat(256);
            let headers = [
                ("Authorization", api.bearer.as_str()),
                ("Idempotency-Key", key.as_str()),
            ];
            let (status, raw) = request(
                api.daemon.port,
                &op.method,
                &path,
                &headers,
                body.as_deref(),
            );
            assert_eq!(
                status, 400,
                "{} {path} with a malformed key: {raw}",
                op.method
            );
            check_documented(doc, &op, "a malformed Idempotency-Key", status, &raw);
        }
        let (status, raw) = api.call(&op.method, &path, body.as_deref(), true);
        assert!(
            status < 500 || (allow_503 && status == 503),
            "{} {path} ({state}): {status}: {raw}",
            op.method
        );
        check_documented(doc, &op, state, status, &raw);
    }
}

/// Every field of an object schema, with its schema.
fn fields(doc: &Value, schema: &Value) -> Vec<(String, Value, bool)> {
    let schema = resolve(doc, schema);
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema["properties"]
        .as_object()
        .map(|props| {
            props
                .iter()
                .map(|(name, s)| {
                    (
                        name.clone(),
                        resolve(doc, s).clone(),
                        required.contains(&name.as_str()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

const MAINNET_ADDRESS: &str = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq";

fn bad_input_matrix(doc: &Value, api: &Api, state: &str) -> usize {
    let mut cases = 0;
    let mut expect_4xx = |op: &Op, what: String, path: &str, body: Option<String>| {
        let (status, raw) = api.call(&op.method, path, body.as_deref(), true);
        assert!(
            (400..500).contains(&status),
            "{} {path} ({state}), {what}: expected 4xx, got {status}: {raw}",
            op.method
        );
        let value: Value = serde_json::from_str(body_of(&raw)).unwrap_or_else(|e| {
            panic!(
                "{} {path} ({state}), {what}: not JSON ({e}): {raw}",
                op.method
            )
        });
        assert!(
            value["message"].is_string(),
            "{} {path}, {what}: {raw}",
            op.method
        );
        cases += 1;
    };
    for op in operations(doc) {
        let query = op.required_query();
        let path = op.path_with(&BTreeMap::new(), &query);
        if let Some(schema) = &op.body {
            let good = sample(doc, schema);
            expect_4xx(&op, "malformed JSON".into(), &path, Some("{\"".into()));
            expect_4xx(
                &op,
                "an array for an object".into(),
                &path,
                Some("[]".into()),
            );
            for (name, field, required) in fields(doc, schema) {
                let with = |value: Value| {
                    let mut body = good.clone();
                    body[&name] = value;
                    Some(body.to_string())
                };
                if required {
                    let mut body = good.clone();
                    body.as_object_mut().expect("object").remove(&name);
                    expect_4xx(
                        &op,
                        format!("without {name}"),
                        &path,
                        Some(body.to_string()),
                    );
                }
                let types = types_of(&field);
                if types.iter().any(|t| t == "integer") {
                    expect_4xx(&op, format!("{name} negative"), &path, with(json!(-1)));
                    expect_4xx(
                        &op,
                        format!("{name} overflowing"),
                        &path,
                        Some(good.to_string().replacen(
                            '{',
                            &format!("{{\"{name}\":18446744073709551616,"),
                            1,
                        )),
                    );
                    expect_4xx(&op, format!("{name} a string"), &path, with(json!("12")));
                } else if types.iter().any(|t| t == "string") {
                    expect_4xx(&op, format!("{name} a number"), &path, with(json!(12)));
                    if name.contains("address") || name == "destination" {
                        expect_4xx(
                            &op,
                            format!("{name} a mainnet address"),
                            &path,
                            with(json!(MAINNET_ADDRESS)),
                        );
                    }
                } else if types.iter().any(|t| t == "array") {
                    expect_4xx(&op, format!("{name} a string"), &path, with(json!("x")));
                } else if types.iter().any(|t| t == "boolean") {
                    expect_4xx(&op, format!("{name} a string"), &path, with(json!("yes")));
                }
            }
        }
        let body = op.body.as_ref().map(|b| sample(doc, b).to_string());
        for (name, _) in &op.path_params {
            for garbage in ["garbage", "..%2F..%2Fetc", &"f".repeat(300), "-1"] {
                let values = BTreeMap::from([(name.clone(), garbage.to_string())]);
                let path = op.path_with(&values, &query);
                expect_4xx(&op, format!("{name} = {garbage:.20}"), &path, body.clone());
            }
        }
        for (name, schema, _) in &op.query_params {
            let garbage: &[&str] = if types_of(schema).iter().any(|t| t == "integer") {
                &["abc", "-1", "18446744073709551616"]
            } else if types_of(schema).iter().any(|t| t == "boolean") {
                &["maybe"]
            } else if schema["format"] == "date-time" {
                &["yesterday"]
            } else {
                continue;
            };
            for value in garbage {
                let q = if query.is_empty() {
                    format!("{name}={value}")
                } else {
                    format!("{query}&{name}={value}")
                };
                let path = op.path_with(&BTreeMap::new(), &q);
                expect_4xx(&op, format!("?{name}={value}"), &path, body.clone());
            }
        }
    }
    cases
}

#[test]
fn every_operation_keeps_its_contract_without_a_wallet_and_with_an_offline_one() {
    let doc = document();
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let api = Api {
        daemon: &daemon,
        bearer: format!("Bearer {}", token(&datadir)),
    };
    let count = operations(&doc).len();
    assert!(count >= 74, "{count} operations in the document");

    contract(&doc, &api, "no wallet", false);
    let cases = bad_input_matrix(&doc, &api, "no wallet");

    // A wallet whose Ark server and chain source do not answer: created, never loaded.
    let dead = format!("http://127.0.0.1:{}", free_port());
    let create = json!({
        "network": "regtest", "ark_server": dead, "force": true,
        "chain_source": {"esplora": {"url": dead}},
    });
    let (status, raw) = api.call(
        "POST",
        "/api/v1/wallet/create",
        Some(&create.to_string()),
        true,
    );
    assert_eq!(status, 200, "{raw}");
    contract(&doc, &api, "offline wallet", true);
    let offline_cases = bad_input_matrix(&doc, &api, "offline wallet");
    println!(
        "bad-input matrix: {cases} cases without a wallet, {offline_cases} with an offline one"
    );

    let (status, _) = daemon.terminate();
    assert_eq!(status.code(), Some(0));
    with_store(&datadir, async |store| {
        let report = store.verify_invariants().await.expect("invariants hold");
        assert_eq!(
            (
                report.vtxos,
                report.movements,
                report.round_states,
                report.events
            ),
            (0, 0, 0, 0),
            "no request changed the wallet"
        );
    });
}
