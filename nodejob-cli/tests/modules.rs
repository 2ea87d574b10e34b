//! Architecture invariant: the command's modules form no import circle. An edge is a path
//! `crate::a::b`, `super::x` or `self::x` in a module's code (its `use` lines and inline
//! paths, comments left out), to the deepest module the path names; inside an inline
//! `mod tests { .. }`, `super::` is the file's own module. A circle among the modules fails
//! this test, naming them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every module of `src`: its path (`mcp::ops`; the crate root is ``) and its code.
fn modules(src: &Path) -> std::io::Result<BTreeMap<String, String>> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap_or(&path).with_extension("");
            let mut parts: Vec<String> = (relative.iter())
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") || parts == ["main"] {
                parts.pop();
            }
            found.insert(parts.join("::"), std::fs::read_to_string(&path)?);
        }
    }
    Ok(found)
}

/// The code of a file without its comments.
fn without_comments(code: &str) -> String {
    code.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths that start with `crate::`, `super::` or `self::` in `code`, each as its segments
/// (a `{a, b::c}` group expanded one level), the first segment being that keyword.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < bytes.len() {
        let starts = ["crate::", "super::", "self::"].iter().find(|k| {
            code_at(&bytes, i, k) && (i == 0 || !(word(bytes[i - 1]) || bytes[i - 1] == ':'))
        });
        let Some(keyword) = starts else {
            i += 1;
            continue;
        };
        let mut segments = vec![keyword.trim_end_matches(':').to_string()];
        i += keyword.len();
        loop {
            let start = i;
            while i < bytes.len() && word(bytes[i]) {
                i += 1;
            }
            if i > start {
                segments.push(bytes[start..i].iter().collect());
            }
            if code_at(&bytes, i, "::{") {
                let end = (i..bytes.len())
                    .find(|&j| bytes[j] == '}')
                    .unwrap_or(bytes.len());
                let group: String = bytes[i + 3..end].iter().collect();
                for item in group.split(',') {
                    let mut path = segments.clone();
                    let item = item.split(" as ").next().unwrap_or("").trim();
                    path.extend(item.split("::").filter(|s| !s.is_empty()).map(String::from));
                    found.push(path);
                }
                i = end;
                break;
            }
            if code_at(&bytes, i, "::") {
                i += 2;
                continue;
            }
            found.push(segments);
            break;
        }
    }
    found
}

fn code_at(chars: &[char], at: usize, s: &str) -> bool {
    s.chars()
        .enumerate()
        .all(|(k, c)| chars.get(at + k) == Some(&c))
}

/// The import edges among `modules`.
fn edges(modules: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let resolve = |parts: &[String]| {
        (0..=parts.len())
            .rev()
            .map(|k| parts[..k].join("::"))
            .find(|m| modules.contains_key(m))
    };
    let mut edges = BTreeMap::new();
    for (module, code) in modules {
        let here: Vec<String> = module
            .split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let code = without_comments(code);
        // An inline `mod x {`: past it, `super::` is this file's module.
        let inline = code
            .find("\nmod tests {")
            .or_else(|| code.find("\n    mod tests {"));
        let (outer, inner) = code.split_at(inline.unwrap_or(code.len()));
        let mut targets = BTreeSet::new();
        for (text, in_inline) in [(outer, false), (inner, true)] {
            for path in paths(text) {
                let (keyword, rest) = path.split_first().unwrap_or((&path[0], &[]));
                let mut parts: Vec<String> = match keyword.as_str() {
                    "crate" => Vec::new(),
                    "super" if !in_inline => here[..here.len().saturating_sub(1)].to_vec(),
                    _ => here.clone(),
                };
                parts.extend(rest.iter().filter(|s| *s != "super").cloned());
                if let Some(target) = resolve(&parts).filter(|t| t != module) {
                    targets.insert(target);
                }
            }
        }
        edges.insert(module.clone(), targets);
    }
    edges
}

/// The modules on a circle, if any: each module from which one of its imports leads back.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let reaches = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = edges[from].iter().collect();
        while let Some(m) = todo.pop() {
            if seen.insert(m.clone()) {
                todo.extend(edges.get(m).into_iter().flatten());
            }
        }
        seen
    };
    edges
        .keys()
        .filter(|m| reaches(m).contains(*m))
        .cloned()
        .collect()
}

#[test]
fn the_modules_form_no_import_circle() -> std::io::Result<()> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src)?;
    let edges = edges(&modules);
    assert!(edges.len() > 20, "{edges:?}");
    assert!(edges["commands::upgrade"].contains("settings"), "{edges:?}");
    let on_circles = circles(&edges);
    assert!(
        on_circles.is_empty(),
        "modules on an import circle: {on_circles:?}\n{edges:#?}"
    );
    Ok(())
}

#[test]
fn a_circle_is_found() {
    let modules: BTreeMap<String, String> = [
        ("".to_string(), "mod a; mod b;".to_string()),
        ("a".into(), "use crate::b::thing;".into()),
        ("b".into(), "use super::a::{x, y as z};".into()),
        (
            "c".into(),
            "use crate::a;\nmod tests {\n    use super::*;\n}".into(),
        ),
    ]
    .into();
    let edges = edges(&modules);
    assert_eq!(circles(&edges), ["a", "b"], "{edges:?}");
}
