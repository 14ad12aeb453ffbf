//! Every function of the C API (as generated into kvcache-sys) is called by
//! the safe crate: a function added to the headers fails this test until it
//! is wrapped.

use std::fs;
use std::path::Path;

#[test]
fn every_c_function_is_wrapped() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bindings = fs::read_to_string(root.join("../kvcache-sys/src/bindings.rs")).unwrap();
    let mut source = String::new();
    for entry in fs::read_dir(root.join("src")).unwrap() {
        source += &fs::read_to_string(entry.unwrap().path()).unwrap();
    }
    let functions: Vec<&str> = bindings
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub fn "))
        .filter_map(|l| l.split('(').next())
        .collect();
    assert!(
        functions.len() > 80,
        "found only {} functions",
        functions.len()
    );
    let missing: Vec<&&str> = functions.iter().filter(|f| !names(&source, f)).collect();
    assert!(missing.is_empty(), "not wrapped: {missing:?}");
}

/// Whether `name` occurs in `source` as a whole identifier.
fn names(source: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    source.match_indices(name).any(|(at, _)| {
        let before = source[..at].chars().next_back();
        let after = source[at + name.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}
