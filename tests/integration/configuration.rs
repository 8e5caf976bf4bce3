//! `docs/configuration.md` against the code, so that the reference cannot drift: every
//! `berth.toml` key with its default, every command-line flag with its environment
//! variable and default, and every environment variable the code reads.

use std::collections::{BTreeMap, BTreeSet};

use clap::CommandFactory;
use serde_json::Value;

fn page() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The cells of the table rows that follow each `### ` heading (or `## ` heading, for
/// the flag and environment tables), keyed by that heading.
fn tables(page: &str) -> BTreeMap<String, Vec<Vec<String>>> {
    let mut out: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    let mut heading = String::new();
    for line in page.lines() {
        if let Some(h) = line.strip_prefix("### ").or(line.strip_prefix("## ")) {
            heading = h.trim().to_string();
            continue;
        }
        let Some(row) = line.strip_prefix('|') else {
            continue;
        };
        let cells: Vec<String> = row
            .trim_end_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect();
        // The header row and the separator row.
        if cells[0].starts_with("---") || !cells[0].starts_with('`') {
            continue;
        }
        out.entry(heading.clone()).or_default().push(cells);
    }
    out
}

fn unquote(cell: &str) -> &str {
    cell.trim().trim_matches('`')
}

/// A documented default as the JSON value the code's default serialises to: `unset` is
/// `null`, anything else a TOML literal.
fn documented_default(cell: &str) -> Value {
    if cell == "unset" {
        return Value::Null;
    }
    let literal = unquote(cell);
    let table: toml::Table = toml::from_str(&format!("v = {literal}"))
        .unwrap_or_else(|e| panic!("default {cell} is not a TOML value: {e}"));
    serde_json::to_value(&table["v"]).expect("a TOML value is JSON")
}

#[test]
fn every_berth_toml_key_is_documented_with_its_default() {
    let code = serde_json::to_value(berth::config::BerthToml::default()).expect("serialises");
    let code = code.as_object().expect("sections");
    let tables = tables(&page());
    let mut documented = BTreeSet::new();
    for (heading, rows) in &tables {
        let Some(section) = heading
            .strip_prefix("`[")
            .and_then(|h| h.strip_suffix("]`"))
        else {
            continue;
        };
        let keys = code[section]
            .as_object()
            .unwrap_or_else(|| panic!("[{section}] is documented but is not a section"));
        for row in rows {
            let key = unquote(&row[0]);
            let default = keys
                .get(key)
                .unwrap_or_else(|| panic!("{section}.{key} is documented but does not exist"));
            assert_eq!(
                &documented_default(&row[1]),
                default,
                "the documented default of {section}.{key}"
            );
            documented.insert(format!("{section}.{key}"));
        }
    }
    for (section, keys) in code {
        for key in keys.as_object().expect("keys").keys() {
            assert!(
                documented.contains(&format!("{section}.{key}")),
                "{section}.{key} is missing from docs/configuration.md"
            );
        }
    }
}

#[test]
fn the_documented_example_is_a_valid_berth_toml() {
    let page = page();
    let example = page
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("an example");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("berth.toml"), example).expect("write");
    berth::config::BerthToml::load_layered(&dir.path().join("berth.toml"), None)
        .expect("the example loads");
}

#[test]
fn every_flag_is_documented_with_its_environment_and_default() {
    let tables = tables(&page());
    let rows = &tables["Command-line flags"];
    let mut cli = berth::cli::Cli::command();
    cli.build();
    let mut seen = BTreeSet::new();
    for arg in cli.get_arguments() {
        let Some(long) = arg.get_long() else {
            continue;
        };
        if matches!(long, "help" | "version") {
            continue;
        }
        let flag = format!("--{long}");
        let row = rows
            .iter()
            .find(|r| r[0].split(", ").any(|f| unquote(f) == flag))
            .unwrap_or_else(|| panic!("{flag} is missing from docs/configuration.md"));
        let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
        assert_eq!(
            env.as_deref().unwrap_or("none"),
            unquote(&row[1]),
            "the environment variable of {flag}"
        );
        if let Some(short) = arg.get_short() {
            assert!(
                row[0].contains(&format!("`-{short}`")),
                "{flag}'s short form -{short}"
            );
        }
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let takes_value = arg.get_action().takes_values();
        match (defaults.as_slice(), takes_value) {
            // A switch.
            (_, false) => assert_eq!(row[2], "off", "{flag} is a switch"),
            ([one], true) => assert_eq!(unquote(&row[2]), one, "the default of {flag}"),
            // Worked out by the code (the datadir, the log file) or none.
            _ => assert_ne!(row[2], "off", "{flag} takes a value"),
        }
        seen.insert(flag);
    }
    for row in rows {
        for flag in row[0].split(", ").map(unquote) {
            assert!(
                flag.len() == 2 || seen.contains(flag),
                "{flag} is documented but berthd has no such flag"
            );
        }
    }
}

/// The names the daemon's code reads with `std::env::var` / `var_os` (literals), and
/// the variables it names by constants (the passphrase's, the store fault trigger's).
fn environment_read_by_the_code() -> BTreeSet<String> {
    let mut names = BTreeSet::from([
        berth::keys::PASSPHRASE_ENV.to_string(),
        berth::store::faults::FAULTS_ENV.to_string(),
    ]);
    let mut dirs = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            // Unit-test files (`tests.rs`, `*_tests/`) read test switches, not settings.
            let test_file = path
                .iter()
                .any(|part| part.to_string_lossy().ends_with("tests") || part == "tests.rs");
            if path.extension().is_none_or(|e| e != "rs") || test_file {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("source");
            for call in ["env::var(\"", "env::var_os(\""] {
                for (at, _) in text.match_indices(call) {
                    let rest = &text[at + call.len()..];
                    let name = &rest[..rest.find('"').expect("a closing quote")];
                    names.insert(name.to_string());
                }
            }
        }
    }
    names
}

#[test]
fn every_environment_variable_the_code_reads_is_documented() {
    let tables = tables(&page());
    let mut documented = BTreeSet::new();
    for row in &tables["Command-line flags"] {
        documented.insert(unquote(&row[1]).to_string());
    }
    for row in &tables["Other environment variables"] {
        for name in row[0].split(", ") {
            documented.insert(unquote(name).to_string());
        }
    }
    let read = environment_read_by_the_code();
    assert!(read.contains("JOURNAL_STREAM"), "the scan finds literals");
    for name in &read {
        assert!(
            documented.contains(name),
            "berthd reads {name}, which docs/configuration.md does not mention"
        );
    }
}
