//! Text from a host or the cluster quoted in a message: cut to a bound, so that a message stays
//! the size of a sentence whatever a host printed.

/// The most characters of host output (a log, a status line, a field of it) that any message,
/// report, progress event or Event quotes: [`quote`] and [`log_tail`] cut to it.
pub const QUOTE_LIMIT: usize = 500;

/// `text` as a message quotes host output: whole when it has at most [`QUOTE_LIMIT`]
/// characters, else its first [`QUOTE_LIMIT`] and how many more were cut. Every quotation of
/// what a host printed goes through this (or [`log_tail`]), so a host that prints a megabyte
/// never makes a megabyte message, report or Event.
pub fn quote(text: &str) -> String {
    let mut chars = text.char_indices();
    match chars.nth(QUOTE_LIMIT) {
        None => text.to_string(),
        Some((cut, _)) => {
            let more = text[cut..].chars().count();
            format!("{}… ({more} more characters)", &text[..cut])
        }
    }
}

/// The last `lines` lines of `log`, as a report quotes a failed host step's log, at most the
/// last [`QUOTE_LIMIT`] characters of them (the end of a log says why it failed).
pub fn log_tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().collect();
    let tail = all[all.len().saturating_sub(lines)..].join("\n");
    let count = tail.chars().count();
    if count <= QUOTE_LIMIT {
        return tail;
    }
    let skip = count - QUOTE_LIMIT;
    let start = tail.char_indices().nth(skip).map_or(0, |(i, _)| i);
    format!("({skip} characters before) …{}", &tail[start..])
}
