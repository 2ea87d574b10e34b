//! ARCHITECTURE.md cannot drift from the code: every path it puts in backticks exists, and
//! every Rust name it puts in backticks (`Context::drive`, `NodeMachine`, `read_again`) is
//! still a name in the workspace's sources. A file moved or a type renamed fails here until
//! the map says so.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The workspace's root (this crate's parent).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate sits in the workspace")
        .to_path_buf()
}

/// Every file under `dir`, skipping build output and git's own folder.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if name == "target" || name == ".git" {
            continue;
        }
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Each backticked span of `text`, with the crate section (`### \`crate\``) it is in.
fn spans(text: &str) -> Vec<(Option<String>, String)> {
    let mut section = None;
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if let Some(heading) = line.strip_prefix("### ") {
            section = heading
                .split('`')
                .nth(1)
                .map(str::to_string)
                .filter(|c| !c.contains(' '));
            continue;
        }
        if line.starts_with("## ") {
            section = None;
        }
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1 && !span.is_empty() {
                out.push((section.clone(), span.to_string()));
            }
        }
    }
    out
}

/// A span that names a file or folder of the repository: a path with a known suffix, or one
/// that ends with `/`.
fn as_path(span: &str) -> Option<&str> {
    let known = [
        ".rs", ".md", ".toml", ".yaml", ".sh", ".go", ".mod", ".lock",
    ];
    let plain = !span.contains(' ') && !span.contains('<') && !span.contains('*');
    (plain && (known.iter().any(|k| span.ends_with(k)) || span.ends_with('/')))
        .then(|| span.trim_end_matches('/'))
}

/// A span that names Rust items: `Name`, `Type::item`, `a_function`, each segment an
/// identifier, at least one with a capital or a `::` or `_` (a plain lowercase word is prose).
fn as_rust_name(span: &str) -> Option<Vec<&str>> {
    let segments: Vec<&str> = span.split("::").collect();
    let ident = |s: &str| {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !segments.iter().all(|s| ident(s)) {
        return None;
    }
    let named = segments.len() > 1
        || span.contains('_')
        || span.chars().next().is_some_and(|c| c.is_ascii_uppercase());
    // SCREAMING constants and environment variables are names too, but ALL-CAPS words
    // (`GET`, `PUT`) are the API's verbs, not ours.
    let verb = span.chars().all(|c| c.is_ascii_uppercase());
    (named && !verb).then_some(segments)
}

#[test]
fn every_path_and_rust_name_in_architecture_md_exists() {
    let root = root();
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut all = Vec::new();
    files(&root, &mut all);
    let relative: Vec<String> = (all.iter())
        .filter_map(|p| p.strip_prefix(&root).ok())
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .collect();
    let dirs: BTreeSet<String> = (relative.iter())
        .flat_map(|p| {
            let parts: Vec<&str> = p.split('/').collect();
            (1..parts.len())
                .map(|n| parts[..n].join("/"))
                .collect::<Vec<_>>()
        })
        .collect();
    let mut words: BTreeSet<String> = BTreeSet::new();
    for path in all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        words.extend(
            text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .map(str::to_string),
        );
    }
    let exists = |section: &Option<String>, path: &str| {
        let mut bases = vec![String::new()];
        if let Some(krate) = section {
            bases.extend([
                format!("{krate}/"),
                format!("{krate}/src/"),
                format!("{krate}/tests/"),
            ]);
        }
        bases.iter().any(|b| {
            let p = format!("{b}{path}");
            relative.contains(&p) || dirs.contains(&p)
        }) || relative.iter().any(|r| r.ends_with(&format!("/{path}")))
            || dirs.iter().any(|d| d.ends_with(&format!("/{path}")))
    };
    let mut missing = Vec::new();
    let (mut paths, mut names) = (0, 0);
    for (section, span) in spans(&map) {
        if let Some(path) = as_path(&span) {
            paths += 1;
            if !exists(&section, path) {
                missing.push(format!("path `{span}` (in {section:?})"));
            }
        } else if let Some(segments) = as_rust_name(&span) {
            names += 1;
            let gone: Vec<&&str> = segments.iter().filter(|s| !words.contains(**s)).collect();
            if !gone.is_empty() {
                missing.push(format!("name `{span}`: {gone:?} in no source file"));
            }
        }
    }
    assert!(
        paths > 50 && names > 100,
        "the map names {paths} paths and {names} Rust names: is this reading it?"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what is not there:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_reading_of_spans_tells_paths_from_names_from_prose() {
    assert_eq!(as_path("drive/hands.rs"), Some("drive/hands.rs"));
    assert_eq!(as_path("e2e/"), Some("e2e"));
    assert_eq!(as_path("--simulate N"), None);
    assert_eq!(
        as_rust_name("Context::drive"),
        Some(vec!["Context", "drive"])
    );
    assert_eq!(as_rust_name("read_again"), Some(vec!["read_again"]));
    assert_eq!(
        as_rust_name("NODEJOB_SOAK_SEEDS"),
        Some(vec!["NODEJOB_SOAK_SEEDS"])
    );
    assert_eq!(as_rust_name("GET"), None);
    assert_eq!(as_rust_name("drain"), None);
    assert_eq!(as_rust_name("&T"), None);
    let spans = spans("### `nodejob-roll`\nsee `executor.rs` and `Hands`\n## next\n`x_y`");
    assert_eq!(
        spans,
        [
            (Some("nodejob-roll".into()), "executor.rs".into()),
            (Some("nodejob-roll".into()), "Hands".into()),
            (None, "x_y".into()),
        ]
    );
}
