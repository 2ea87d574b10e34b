//! [`quote`] and [`log_tail`]: every quotation of host output is bounded by [`QUOTE_LIMIT`]
//! characters, cut on a character boundary, and says what it left out.

use nodejob_core::{QUOTE_LIMIT, log_tail, quote};
use proptest::prelude::*;

/// The most characters a quotation adds to what it keeps: "… (N more characters)" or
/// "(N characters before) …", N at most 20 digits.
const NOTE: usize = 40;

#[test]
fn a_text_within_the_limit_is_quoted_whole() {
    for text in [
        String::new(),
        "stratum: ok".to_string(),
        "é".repeat(QUOTE_LIMIT),
        "x".repeat(QUOTE_LIMIT),
    ] {
        assert_eq!(quote(&text), text);
    }
}

#[test]
fn a_text_past_the_limit_keeps_its_start_and_says_how_much_more() {
    let text = "x".repeat(QUOTE_LIMIT + 1);
    assert_eq!(
        quote(&text),
        format!("{}… (1 more characters)", "x".repeat(QUOTE_LIMIT))
    );
    // A mebibyte: its first QUOTE_LIMIT characters, not its bytes.
    let text = format!("{}{}", "é".repeat(QUOTE_LIMIT), "y".repeat(1 << 20));
    let quoted = quote(&text);
    assert!(quoted.starts_with(&"é".repeat(QUOTE_LIMIT)), "{quoted}");
    assert!(
        quoted.ends_with(&format!("… ({} more characters)", 1 << 20)),
        "{quoted}"
    );
    assert!(quoted.chars().count() <= QUOTE_LIMIT + NOTE);
}

#[test]
fn a_log_tail_is_its_last_lines() {
    let log = "one\ntwo\nthree\nfour\n";
    assert_eq!(log_tail(log, 2), "three\nfour");
    assert_eq!(log_tail(log, 10), "one\ntwo\nthree\nfour");
    assert_eq!(log_tail(log, 0), "");
    assert_eq!(log_tail("", 3), "");
}

#[test]
fn a_log_tail_past_the_limit_keeps_its_end_and_says_how_much_came_before() {
    // One line of a mebibyte, then the line that says why it failed.
    let log = format!("{}\nstratum: error: it failed\n", "x".repeat(1 << 20));
    let tail = log_tail(&log, 20);
    assert!(tail.ends_with("\nstratum: error: it failed"), "{tail}");
    assert!(tail.starts_with('('), "{tail}");
    assert!(tail.contains("characters before) …"), "{tail}");
    assert!(tail.chars().count() <= QUOTE_LIMIT + NOTE, "{}", tail.len());
    // Cut on a character boundary, counted in characters.
    let log = "é".repeat(QUOTE_LIMIT + 7);
    let tail = log_tail(&log, 1);
    assert_eq!(
        tail,
        format!("(7 characters before) …{}", "é".repeat(QUOTE_LIMIT))
    );
}

proptest! {
    #[test]
    fn a_quotation_is_bounded_and_starts_as_the_text(text in ".{0,700}") {
        let quoted = quote(&text);
        let count = text.chars().count();
        prop_assert!(quoted.chars().count() <= QUOTE_LIMIT + NOTE);
        let kept: String = text.chars().take(QUOTE_LIMIT).collect();
        prop_assert!(quoted.starts_with(&kept));
        prop_assert_eq!(quoted == text, count <= QUOTE_LIMIT);
    }

    #[test]
    fn a_log_tail_is_bounded_and_ends_as_the_log(
        lines in proptest::collection::vec(".{0,200}", 0..8),
        keep in 0usize..10,
    ) {
        let log = lines.join("\n");
        let tail = log_tail(&log, keep);
        prop_assert!(tail.chars().count() <= QUOTE_LIMIT + NOTE);
        let whole: Vec<&str> = log.lines().collect();
        let wanted = whole[whole.len().saturating_sub(keep)..].join("\n");
        let end: String = {
            let chars: Vec<char> = wanted.chars().collect();
            chars[chars.len().saturating_sub(QUOTE_LIMIT)..].iter().collect()
        };
        prop_assert!(tail.ends_with(&end));
        prop_assert_eq!(tail == wanted, wanted.chars().count() <= QUOTE_LIMIT);
    }
}
