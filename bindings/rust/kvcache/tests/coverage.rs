//! Every function of the C API (as generated into kvcache-sys) is called by
//! the safe crate, and every member of its transparent structs is read or
//! written: a function or member added to the headers fails this test until
//! it is wrapped.

use std::fs;
use std::path::Path;

fn sources() -> (String, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bindings = fs::read_to_string(root.join("../kvcache-sys/src/bindings.rs")).unwrap();
    let mut source = String::new();
    read_tree(&root.join("src"), &mut source);
    (bindings, source)
}

/// Appends every file under `dir` (modules may have folders of their own).
fn read_tree(dir: &Path, source: &mut String) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            read_tree(&path, source);
        } else {
            *source += &fs::read_to_string(&path).unwrap();
        }
    }
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

#[test]
fn every_c_function_is_wrapped() {
    let (bindings, source) = sources();
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

#[test]
fn every_struct_member_is_used() {
    let (bindings, source) = sources();
    let mut missing = Vec::new();
    let mut members = 0;
    let mut current: Option<&str> = None;
    for line in bindings.lines() {
        if let Some(rest) = line.strip_prefix("pub struct ") {
            current = rest.split_whitespace().next();
        } else if line == "}" {
            current = None;
        } else if let (Some(s), Some(rest)) = (current, line.strip_prefix("    pub ")) {
            let field = rest.split(':').next().unwrap();
            if field == "struct_size" || field == "reserved" {
                continue;
            }
            members += 1;
            if !source.contains(&format!(".{field}")) && !source.contains(&format!("{field}:")) {
                missing.push(format!("{s}.{field}"));
            }
        }
    }
    assert!(members > 60, "found only {members} struct members");
    assert!(missing.is_empty(), "not used: {missing:?}");
}
