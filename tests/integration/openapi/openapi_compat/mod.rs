//! Compares two OpenAPI 3.1 documents under the API README's compatibility rules:
//!
//! 1. every operation of theirs exists in ours with the same path and query parameters,
//!    the same request body fields and JSON types, and the same required fields;
//! 2. every response field of theirs is in ours, with the same JSON type and enum
//!    spellings; fields theirs requires, ours requires. Extra fields are fine.
//!
//! Schemas are first normalised into [`Shape`]s (references resolved, nullability and
//! unions flattened), so the comparison is about what goes over the wire, not about
//! how either generator happened to spell it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// What a schema allows on the wire.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// No constraint (`{}`).
    Any,
    Null,
    Bool,
    Integer,
    Number,
    /// A string; `Some` lists the only values allowed.
    String(Option<BTreeSet<String>>),
    Array(Box<Shape>),
    Object {
        properties: BTreeMap<String, Shape>,
        required: BTreeSet<String>,
        /// `additionalProperties`: a map's values.
        additional: Option<Box<Shape>>,
    },
    /// Any one of these (never nested, never of one).
    OneOf(Vec<Shape>),
}

/// An HTTP operation: `("POST", "/api/v1/wallet/create")`.
pub type OpKey = (String, String);

const METHODS: &[&str] = &["get", "put", "post", "delete", "patch"];

pub struct Doc<'a> {
    root: &'a Value,
}

impl<'a> Doc<'a> {
    pub fn new(root: &'a Value) -> Self {
        Doc { root }
    }

    pub fn operations(&self) -> BTreeMap<OpKey, &'a Value> {
        let mut ops = BTreeMap::new();
        if let Some(paths) = self.root["paths"].as_object() {
            for (path, item) in paths {
                for method in METHODS {
                    if let Some(op) = item.get(*method) {
                        ops.insert((method.to_uppercase(), path.clone()), op);
                    }
                }
            }
        }
        ops
    }

    fn resolve(&self, mut value: &'a Value) -> &'a Value {
        for _ in 0..16 {
            let Some(reference) = value.get("$ref").and_then(Value::as_str) else {
                return value;
            };
            let pointer = reference.trim_start_matches('#');
            match self.root.pointer(pointer) {
                Some(target) => value = target,
                None => return &Value::Null,
            }
        }
        value
    }

    pub fn shape(&self, schema: &'a Value) -> Shape {
        self.shape_at(schema, 0)
    }

    fn shape_at(&self, schema: &'a Value, depth: usize) -> Shape {
        if depth > 32 {
            return Shape::Any; // a recursive type: stop unfolding it
        }
        let schema = self.resolve(schema);
        let Some(map) = schema.as_object() else {
            return Shape::Any;
        };
        for key in ["oneOf", "anyOf"] {
            if let Some(variants) = map.get(key).and_then(Value::as_array) {
                return one_of(
                    variants
                        .iter()
                        .map(|v| self.shape_at(v, depth + 1))
                        .collect(),
                );
            }
        }
        if let Some(parts) = map.get("allOf").and_then(Value::as_array) {
            let mut merged = Shape::Any;
            for part in parts {
                merged = merge_all_of(merged, self.shape_at(part, depth + 1));
            }
            return merged;
        }
        let types: Vec<&str> = match map.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ if map.contains_key("properties") => vec!["object"],
            _ if map.contains_key("enum") => vec!["string"],
            _ => return Shape::Any,
        };
        one_of(
            types
                .into_iter()
                .map(|t| self.typed_shape(t, map, depth))
                .collect(),
        )
    }

    fn typed_shape(
        &self,
        ty: &str,
        map: &'a serde_json::Map<String, Value>,
        depth: usize,
    ) -> Shape {
        match ty {
            "null" => Shape::Null,
            "boolean" => Shape::Bool,
            "integer" => Shape::Integer,
            "number" => Shape::Number,
            "string" => Shape::String(map.get("enum").and_then(Value::as_array).map(|values| {
                values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })),
            "array" => Shape::Array(Box::new(
                map.get("items")
                    .map_or(Shape::Any, |items| self.shape_at(items, depth + 1)),
            )),
            "object" => Shape::Object {
                properties: map
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|props| {
                        props
                            .iter()
                            .map(|(name, s)| (name.clone(), self.shape_at(s, depth + 1)))
                            .collect()
                    })
                    .unwrap_or_default(),
                required: map
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| {
                        r.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                additional: match map.get("additionalProperties") {
                    Some(Value::Object(_)) => Some(Box::new(
                        self.shape_at(&map["additionalProperties"], depth + 1),
                    )),
                    _ => None,
                },
            },
            _ => Shape::Any,
        }
    }

    /// The operation's parameters by `(in, name)`: (required, shape).
    fn parameters(&self, op: &'a Value) -> BTreeMap<(String, String), (bool, Shape)> {
        let mut out = BTreeMap::new();
        for param in op["parameters"].as_array().into_iter().flatten() {
            let param = self.resolve(param);
            let location = param["in"].as_str().unwrap_or_default().to_string();
            let name = param["name"].as_str().unwrap_or_default().to_string();
            let required = param["required"].as_bool().unwrap_or(false);
            out.insert((location, name), (required, self.shape(&param["schema"])));
        }
        out
    }

    fn json_body(&self, holder: &'a Value) -> Option<Shape> {
        let holder = self.resolve(holder);
        holder["content"]
            .get("application/json")
            .map(|media| self.shape(&media["schema"]))
    }
}

fn one_of(variants: Vec<Shape>) -> Shape {
    let mut flat = Vec::new();
    for variant in variants {
        match variant {
            Shape::OneOf(inner) => flat.extend(inner),
            other if !flat.contains(&other) => flat.push(other),
            _ => {}
        }
    }
    if flat.len() == 1 {
        flat.remove(0)
    } else {
        Shape::OneOf(flat)
    }
}

fn merge_all_of(a: Shape, b: Shape) -> Shape {
    match (a, b) {
        (Shape::Any, other) | (other, Shape::Any) => other,
        (
            Shape::Object {
                mut properties,
                mut required,
                additional,
            },
            Shape::Object {
                properties: p2,
                required: r2,
                additional: a2,
            },
        ) => {
            properties.extend(p2);
            required.extend(r2);
            Shape::Object {
                properties,
                required,
                additional: additional.or(a2),
            }
        }
        (a, _) => a,
    }
}

/// Whether ours accepts every value theirs accepts (request direction). Differences go
/// to `errors`, prefixed with `at`.
pub fn accepts(ours: &Shape, theirs: &Shape, at: &str, errors: &mut Vec<String>) {
    match (ours, theirs) {
        (Shape::Any, _) => {}
        (_, Shape::OneOf(variants)) => {
            for variant in variants {
                accepts(ours, variant, at, errors);
            }
        }
        (Shape::OneOf(variants), _) => {
            let tries: Vec<Vec<String>> = variants
                .iter()
                .map(|v| collect(|e| accepts(v, theirs, at, e)))
                .collect();
            if !tries.iter().any(Vec::is_empty) {
                errors.push(format!(
                    "{at}: no variant of ours accepts theirs ({}){}",
                    kind(theirs),
                    closest(&tries)
                ));
            }
        }
        (Shape::Number, Shape::Integer) => {}
        (Shape::String(ours_enum), Shape::String(theirs_enum)) => match (ours_enum, theirs_enum) {
            (None, _) => {}
            (Some(_), None) => {
                errors.push(format!("{at}: ours limits the values, theirs does not"))
            }
            (Some(o), Some(t)) => {
                let missing: Vec<_> = t.difference(o).collect();
                if !missing.is_empty() {
                    errors.push(format!("{at}: ours does not accept {missing:?}"));
                }
            }
        },
        (Shape::Array(o), Shape::Array(t)) => accepts(o, t, &format!("{at}[]"), errors),
        (
            Shape::Object {
                properties: op,
                required: or,
                additional: oa,
            },
            Shape::Object {
                properties: tp,
                required: tr,
                additional: ta,
            },
        ) => {
            for (name, t_shape) in tp {
                let path = format!("{at}.{name}");
                match op.get(name) {
                    None => errors.push(format!("{path}: missing in ours")),
                    Some(o_shape) => {
                        if or.contains(name) != tr.contains(name) {
                            errors.push(format!(
                                "{path}: required in {} only",
                                if or.contains(name) { "ours" } else { "theirs" }
                            ));
                        }
                        accepts(o_shape, t_shape, &path, errors);
                    }
                }
            }
            for name in or.difference(tr) {
                if !tp.contains_key(name) {
                    errors.push(format!("{at}.{name}: ours requires a field theirs lacks"));
                }
            }
            if let (Some(o), Some(t)) = (oa, ta) {
                accepts(o, t, &format!("{at}{{}}"), errors);
            } else if ta.is_some() && oa.is_none() && op.is_empty() {
                errors.push(format!("{at}: theirs is a map, ours is not"));
            }
        }
        (o, t) if o == t => {}
        (o, t) => errors.push(format!("{at}: ours is {}, theirs is {}", kind(o), kind(t))),
    }
}

/// Values bark-wallet 0.8 can report that barkd 0.6 did not know: an exit state
/// (`vtxo-swept`, the server swept the VTXO) and an exit error (`invalid-fee-margin`).
/// berthd reports them as they are rather than hide a real state; these, and only
/// these, may appear in responses beyond barkd's enums.
pub const BARK_08_ADDITIONS: &[&str] = &["vtxo-swept", "invalid-fee-margin"];

/// Response fields barkd itself sends as `null` although its document says they are
/// never null: `ArkInfo.max_vtxo_amount` when the server sets no maximum. berthd
/// sends the same `null` rather than invent a number.
pub const NULL_AS_BARKD_SENDS: &[&str] = &["max_vtxo_amount"];

fn without_null(shape: &Shape) -> Shape {
    match shape {
        Shape::OneOf(variants) => one_of(
            variants
                .iter()
                .filter(|v| **v != Shape::Null)
                .cloned()
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A tagged variant whose tag is one of [`BARK_08_ADDITIONS`].
fn is_bark_08_addition(shape: &Shape) -> bool {
    match shape {
        Shape::Object { properties, .. } => properties.values().any(|p| {
            matches!(p, Shape::String(Some(values))
                if values.len() == 1 && values.iter().all(|v| BARK_08_ADDITIONS.contains(&v.as_str())))
        }),
        _ => false,
    }
}

/// Whether every value ours produces is one theirs documents (response direction).
pub fn provides(ours: &Shape, theirs: &Shape, at: &str, errors: &mut Vec<String>) {
    match (ours, theirs) {
        (_, Shape::Any) => {}
        (Shape::OneOf(variants), _) => {
            for variant in variants {
                if !is_bark_08_addition(variant) {
                    provides(variant, theirs, at, errors);
                }
            }
        }
        (_, Shape::OneOf(variants)) => {
            let tries: Vec<Vec<String>> = variants
                .iter()
                .map(|v| collect(|e| provides(ours, v, at, e)))
                .collect();
            if !tries.iter().any(Vec::is_empty) {
                errors.push(format!(
                    "{at}: ours ({}) matches no variant of theirs{}",
                    kind(ours),
                    closest(&tries)
                ));
            }
        }
        (Shape::Integer, Shape::Number) => {}
        (Shape::String(ours_enum), Shape::String(theirs_enum)) => match (ours_enum, theirs_enum) {
            (_, None) => {}
            (None, Some(_)) => {
                errors.push(format!("{at}: theirs limits the values, ours does not"))
            }
            (Some(o), Some(t)) => {
                let extra: Vec<_> = o
                    .difference(t)
                    .filter(|v| !BARK_08_ADDITIONS.contains(&v.as_str()))
                    .collect();
                if !extra.is_empty() {
                    errors.push(format!("{at}: ours may send {extra:?}, unknown to theirs"));
                }
            }
        },
        (Shape::Array(o), Shape::Array(t)) => provides(o, t, &format!("{at}[]"), errors),
        (
            Shape::Object {
                properties: op,
                required: or,
                additional: oa,
            },
            Shape::Object {
                properties: tp,
                required: tr,
                additional: ta,
            },
        ) => {
            for (name, t_shape) in tp {
                let path = format!("{at}.{name}");
                match op.get(name) {
                    None => errors.push(format!("{path}: missing in ours")),
                    Some(o_shape) => {
                        if tr.contains(name) && !or.contains(name) {
                            errors.push(format!("{path}: theirs always sends it, ours may not"));
                        }
                        let o_shape = if NULL_AS_BARKD_SENDS.contains(&name.as_str()) {
                            &without_null(o_shape)
                        } else {
                            o_shape
                        };
                        provides(o_shape, t_shape, &path, errors);
                    }
                }
            }
            if let (Some(o), Some(t)) = (oa, ta) {
                provides(o, t, &format!("{at}{{}}"), errors);
            }
        }
        (o, t) if o == t => {}
        (o, t) => errors.push(format!("{at}: ours is {}, theirs is {}", kind(o), kind(t))),
    }
}

fn collect(f: impl FnOnce(&mut Vec<String>)) -> Vec<String> {
    let mut errors = Vec::new();
    f(&mut errors);
    errors
}

/// The differences from the variant that came closest, to say why none matched.
fn closest(tries: &[Vec<String>]) -> String {
    tries
        .iter()
        .min_by_key(|errors| errors.len())
        .map(|errors| format!("; the closest differs: {}", errors.join("; ")))
        .unwrap_or_default()
}

fn kind(shape: &Shape) -> String {
    match shape {
        Shape::Any => "anything".into(),
        Shape::Null => "null".into(),
        Shape::Bool => "boolean".into(),
        Shape::Integer => "integer".into(),
        Shape::Number => "number".into(),
        Shape::String(None) => "string".into(),
        Shape::String(Some(values)) => format!("one of {values:?}"),
        Shape::Array(_) => "array".into(),
        Shape::Object { properties, .. } => {
            format!(
                "object {{{}}}",
                properties.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        }
        Shape::OneOf(variants) => {
            format!(
                "one of [{}]",
                variants.iter().map(kind).collect::<Vec<_>>().join(" | ")
            )
        }
    }
}

/// Every rule-1/2 difference of one operation present in both documents.
pub fn compare_operation(
    ours_doc: &Doc,
    ours: &Value,
    theirs_doc: &Doc,
    theirs: &Value,
    name: &str,
) -> Vec<String> {
    let mut errors = Vec::new();
    if theirs["deprecated"].as_bool() == Some(true) && ours["deprecated"].as_bool() != Some(true) {
        errors.push(format!(
            "{name}: theirs is deprecated, ours is not marked so"
        ));
    }

    let ours_params = ours_doc.parameters(ours);
    let theirs_params = theirs_doc.parameters(theirs);
    for ((location, param), (t_required, t_shape)) in &theirs_params {
        let at = format!("{name} {location} parameter {param}");
        match ours_params.get(&(location.clone(), param.clone())) {
            None => errors.push(format!("{at}: missing in ours")),
            Some((o_required, o_shape)) => {
                if o_required != t_required {
                    errors.push(format!(
                        "{at}: required {o_required} in ours, {t_required} in theirs"
                    ));
                }
                accepts(o_shape, t_shape, &at, &mut errors);
            }
        }
    }
    for ((location, param), (o_required, _)) in &ours_params {
        if *o_required && !theirs_params.contains_key(&(location.clone(), param.clone())) {
            errors.push(format!(
                "{name} {location} parameter {param}: ours requires it, theirs has none"
            ));
        }
    }

    let theirs_body = theirs
        .get("requestBody")
        .and_then(|b| theirs_doc.json_body(b));
    let ours_body = ours.get("requestBody").and_then(|b| ours_doc.json_body(b));
    match (ours_body, theirs_body) {
        (Some(o), Some(t)) => accepts(&o, &t, &format!("{name} request body"), &mut errors),
        (None, Some(_)) => errors.push(format!("{name}: ours takes no JSON request body")),
        (Some(_), None) => errors.push(format!(
            "{name}: ours takes a JSON request body, theirs none"
        )),
        (None, None) => {}
    }

    let empty = serde_json::Map::new();
    let theirs_responses = theirs["responses"].as_object().unwrap_or(&empty);
    let ours_responses = ours["responses"].as_object().unwrap_or(&empty);
    for (status, t_response) in theirs_responses {
        let Some(t_shape) = theirs_doc.json_body(t_response) else {
            continue;
        };
        let at = format!("{name} response {status}");
        match ours_responses.get(status).map(|r| ours_doc.json_body(r)) {
            Some(Some(o_shape)) => provides(&o_shape, &t_shape, &at, &mut errors),
            Some(None) => errors.push(format!("{at}: ours has no JSON body")),
            // Error statuses each document lists are documentation; success is the contract.
            None if status.starts_with('2') => errors.push(format!("{at}: missing in ours")),
            None => {}
        }
    }
    errors
}
