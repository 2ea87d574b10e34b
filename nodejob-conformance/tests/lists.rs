//! The scenario lists a backend accounts for (`scenarios::ALL`, `nodes::ALL`) are the lists
//! the `conformance!` and `conformance_nodes!` macros expand, in order.

/// The names macro `macro_name` of `src/lib.rs` expands, in order: its `@each` list.
fn listed(macro_name: &str) -> Vec<String> {
    let source = include_str!("../src/lib.rs");
    let start = source
        .find(&format!("macro_rules! {macro_name} {{"))
        .expect("the macro");
    let list = &source[start..];
    let list = &list[list.find("$make;").expect("its list") + "$make;".len()..];
    let list = &list[..list.find(");").expect("its end")];
    (list.split(','))
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect()
}

#[test]
fn every_scenario_is_named_in_its_modules_list() {
    assert_eq!(listed("conformance"), nodejob_conformance::scenarios::ALL);
    assert_eq!(listed("conformance_nodes"), nodejob_conformance::nodes::ALL);
    assert_eq!(
        listed("conformance_custom"),
        nodejob_conformance::custom::ALL
    );
}
