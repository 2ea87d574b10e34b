//! The `nodejob` command beside its engine: `nodejob upgrade --simulate N --to v1.38.0` (its
//! output piped) and the engine's roll of the same cluster ([`crate::roll`] of
//! [`Shape::Command`](crate::roll::Shape::Command), `nodejob-bench roll N WIDTH command`) at
//! the same size and `max_unavailable`, each in a process of its own, measured alike: CPU (user
//! and system), wall time and peak resident memory. What the command spends beyond its engine
//! is what it adds: the simulated cluster's setup, presentation, the report.
//!
//! Each is run by a `nodejob-bench measure -- PROGRAM ARGS...` of its own, which waits for its
//! one child and answers the kernel's account of it (`getrusage(RUSAGE_CHILDREN)`): CPU to the
//! last tick, and the child's own peak RSS, since that process had no other child.
//!
//! Both roll a replica of `web` on every worker behind a budget allowing a tenth of them down,
//! in paused (virtual) time on the fake.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeVal;
use serde_json::json;

/// What one process cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cost {
    /// CPU, user and system.
    pub cpu: Duration,
    /// Wall time, from its start to its end.
    pub wall: Duration,
    /// Its peak resident memory, in KiB.
    pub peak_rss_kib: u64,
    /// Its exit status: a roll that ends with a node failed exits 1, and is measured as well.
    pub exit: i32,
    /// What the roll did, when its last line of output says (the engine's roll prints it as
    /// JSON; the command does not).
    pub work: Option<Work>,
}

/// What a roll did: the work its CPU is spent on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Work {
    /// API calls the driver made (each served by the fake).
    pub calls: u64,
    /// Pods evicted.
    pub evicted: u64,
}

impl Work {
    /// From a roll's line of JSON (`nodejob-bench roll`'s): its calls by verb, summed, and its
    /// evictions. `None` for any other line.
    pub fn of_line(line: &str) -> Option<Work> {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let calls = v["calls"]
            .as_object()?
            .values()
            .map(|c| c.as_u64())
            .sum::<Option<u64>>()?;
        Some(Work {
            calls,
            evicted: v["evicted"].as_u64()?,
        })
    }
}

impl Cost {
    /// As one line of JSON, for the parent process.
    pub fn to_json(&self) -> String {
        json!({
            "cpu_us": self.cpu.as_micros() as u64,
            "wall_us": self.wall.as_micros() as u64,
            "peak_rss_kib": self.peak_rss_kib,
            "exit": self.exit,
            "work": self.work.map(|w| json!({"calls": w.calls, "evicted": w.evicted})),
        })
        .to_string()
    }

    /// Reads [`Cost::to_json`]'s line.
    ///
    /// # Errors
    /// When it is not such a line.
    pub fn from_json(line: &str) -> anyhow::Result<Cost> {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let num = |k: &str| {
            v[k].as_u64()
                .ok_or_else(|| anyhow::anyhow!("no {k} in {line}"))
        };
        Ok(Cost {
            cpu: Duration::from_micros(num("cpu_us")?),
            wall: Duration::from_micros(num("wall_us")?),
            peak_rss_kib: num("peak_rss_kib")?,
            exit: v["exit"]
                .as_i64()
                .and_then(|e| i32::try_from(e).ok())
                .ok_or_else(|| anyhow::anyhow!("no exit in {line}"))?,
            work: v["work"]["calls"]
                .as_u64()
                .zip(v["work"]["evicted"].as_u64())
                .map(|(calls, evicted)| Work { calls, evicted }),
        })
    }
}

/// Runs `program` with `args` to its end, its stdout piped to this process and read (its last
/// line kept, for the [`Work`] it may tell), and answers what it cost and how it exited. Must be this process's only child, ever: its peak
/// RSS is the largest of the children waited for.
///
/// # Errors
/// When it cannot start, or ends by a signal or with a usage error (exit 2; its stderr said).
pub fn measure(program: &Path, args: &[String]) -> anyhow::Result<Cost> {
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow::anyhow!("starting {}: {e}", program.display()))?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut stderr = child
        .stderr
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stderr"))?;
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    // Read to its end, keeping only the last line: the command prints a line a step.
    let mut last = String::new();
    for line in std::io::BufRead::lines(std::io::BufReader::new(&mut stdout)) {
        let line = line?;
        if !line.trim().is_empty() {
            last = line;
        }
    }
    let status = child.wait()?;
    let wall = started.elapsed();
    let errors = errors.join().unwrap_or_default();
    let exit = status.code().filter(|code| *code != 2);
    let Some(exit) = exit else {
        anyhow::bail!(
            "{} {}: {status}: {errors}",
            program.display(),
            args.join(" ")
        );
    };
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN)?;
    let secs = |t: TimeVal| {
        Duration::from_secs(u64::try_from(t.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap_or(0))
    };
    Ok(Cost {
        cpu: secs(usage.user_time()) + secs(usage.system_time()),
        wall,
        // Linux counts it in KiB.
        peak_rss_kib: u64::try_from(usage.max_rss()).unwrap_or(0),
        exit,
        work: Work::of_line(&last),
    })
}

/// The command's arguments for a roll of `nodes` at `width` (`1`, `10%`).
pub fn upgrade_args(nodes: usize, width: &str) -> Vec<String> {
    [
        "upgrade",
        "--simulate",
        &nodes.to_string(),
        "--to",
        "v1.38.0",
        "--max-unavailable",
        width,
    ]
    .map(str::to_string)
    .to_vec()
}

/// One row: a size and width, the engine's cost and the command's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Beside {
    /// Nodes.
    pub nodes: usize,
    /// The engine's roll.
    pub engine: Cost,
    /// The command's.
    pub command: Cost,
}

impl Beside {
    /// The command's CPU over the engine's.
    pub fn ratio(&self) -> f64 {
        self.command.cpu.as_secs_f64() / self.engine.cpu.as_secs_f64().max(1e-9)
    }
}

/// How much more CPU each API call of the roll took in `to` than in `from` (both engine
/// rolls that told their [`Work`]).
pub fn per_call_growth(from: &Cost, to: &Cost) -> Option<f64> {
    let per_call = |c: &Cost| {
        let work = c.work?;
        Some(c.cpu.as_secs_f64() / (work.calls.max(1) as f64))
    };
    Some(per_call(to)? / per_call(from)?.max(1e-12))
}

/// How much more CPU `to` took than `from`, per how many more nodes: `(cpu ratio, nodes
/// ratio)`.
pub fn growth(from: &Cost, to: &Cost, nodes: (usize, usize)) -> (f64, f64) {
    (
        to.cpu.as_secs_f64() / from.cpu.as_secs_f64().max(1e-9),
        nodes.1 as f64 / nodes.0 as f64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_reads_back_as_written() -> anyhow::Result<()> {
        let cost = Cost {
            cpu: Duration::from_micros(1_234_567),
            wall: Duration::from_micros(2_345_678),
            peak_rss_kib: 98_765,
            exit: 1,
            work: None,
        };
        assert_eq!(Cost::from_json(&cost.to_json())?, cost);
        let worked = Cost {
            work: Some(Work {
                calls: 41_442,
                evicted: 1_319,
            }),
            ..cost
        };
        assert_eq!(Cost::from_json(&worked.to_json())?, worked);
        assert!(Cost::from_json("{}").is_err());
        Ok(())
    }

    #[test]
    fn a_rolls_line_tells_its_work_and_any_other_line_none() {
        let line = r#"{"calls":{"create_job":100,"evict_pod":98,"get_lease":501},"evicted":98,"nodes":100}"#;
        let work = Work::of_line(line);
        assert_eq!(
            work,
            Some(Work {
                calls: 699,
                evicted: 98
            })
        );
        assert_eq!(Work::of_line("5 node(s) upgraded to v1.38.0"), None);
        assert_eq!(Work::of_line(r#"{"calls":{"x":"y"},"evicted":1}"#), None);
    }
}
