//! `jobs` for people: a table of the node Jobs, or a line saying there is none.

use crate::inspect::jobs::{Row, State};
use crate::present::{Columns, table};

/// `jobs` for people: a table, or a line saying there is no node Job in `namespace` (empty:
/// every namespace, `-A`, each row then led by its NAMESPACE). With [`Columns::Wide`] (`-o
/// wide`) the table also has each Job's UID (what its status, Pod and log are read by) and
/// CREATED (its `creationTimestamp`).
pub(crate) fn text(rows: &[Row], namespace: &str, columns: Columns) -> String {
    if rows.is_empty() {
        return match namespace {
            "" => "no node jobs in any namespace\n".to_string(),
            ns => format!("no node jobs in namespace {ns}\n"),
        };
    }
    let every = namespace.is_empty();
    let lines = narrow(rows);
    let lines: Vec<Vec<String>> = (lines.into_iter().zip(
        std::iter::once("NAMESPACE".to_string()).chain(rows.iter().map(|r| r.namespace.clone())),
    ))
    .map(|(row, ns)| every.then_some(ns).into_iter().chain(row).collect())
    .collect();
    if columns == Columns::Narrow {
        return table(&lines);
    }
    let wide =
        std::iter::once(["UID".to_string(), "CREATED".to_string()]).chain(rows.iter().map(|r| {
            let or_dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
            [or_dash(&r.uid), or_dash(&r.created)]
        }));
    let lines: Vec<Vec<String>> = (lines.into_iter().zip(wide))
        .map(|(row, more)| row.into_iter().chain(more).collect())
        .collect();
    table(&lines)
}

/// The table's rows of `rows`, headed, as `jobs` shows them at the least.
fn narrow(rows: &[Row]) -> Vec<[String; 5]> {
    let mut lines = vec![["NAME", "NODE", "STATUS", "EXIT", "AGE"].map(String::from)];
    for r in rows {
        lines.push([
            r.name.clone(),
            r.node.clone(),
            r.status.as_str().to_string(),
            match (r.exit_code, r.disrupted, &r.no_exit) {
                (Some(c), false, _) => c.to_string(),
                (Some(c), true, _) => format!("{c} (killed)"),
                // Not finished: nothing to explain.
                (None, _, _) if r.status == State::Running => "-".into(),
                (None, _, Some(why)) => format!("- ({why})"),
                (None, _, None) => "-".into(),
            },
            r.age_seconds.map_or_else(|| "?".into(), age),
        ]);
    }
    lines
}

/// An age as kubectl shows one: `45s`, `3m20s`, `47m`, `5h12m`, `2d3h`, `12d`.
fn age(seconds: i64) -> String {
    let (m, h, d) = (seconds / 60, seconds / 3600, seconds / 86_400);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if m < 10 => match s % 60 {
            0 => format!("{m}m"),
            rest => format!("{m}m{rest}s"),
        },
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => match m % 60 {
            0 => format!("{h}h"),
            rest => format!("{h}h{rest}m"),
        },
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 => match h % 24 {
            0 => format!("{d}d"),
            rest => format!("{d}d{rest}h"),
        },
        _ => format!("{d}d"),
    }
}

#[cfg(test)]
mod tests {
    use super::age;

    #[test]
    fn ages_read_as_kubectl_shows_them() {
        let table = [
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 12 * 60, "5h12m"),
            (47 * 3600, "47h"),
            (2 * 86_400 + 3 * 3600, "2d3h"),
            (12 * 86_400, "12d"),
        ];
        for (seconds, want) in table {
            assert_eq!(age(seconds), want, "{seconds}s");
        }
    }
}
