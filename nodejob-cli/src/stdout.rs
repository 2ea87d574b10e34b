//! What the command prints on stdout: [`write()`], and the `outln!` and `out!` macros over it.

use std::io::Write as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::exit::code;

/// `println!` for what the command prints on stdout, through [`write()`]: a reader that went
/// away ends the process quietly instead of a panic.
macro_rules! outln {
    () => { $crate::stdout::write(format_args!("\n")) };
    ($($t:tt)*) => { $crate::stdout::write(format_args!("{}\n", format_args!($($t)*))) };
}

/// `print!` through [`write()`].
macro_rules! out {
    ($($t:tt)*) => { $crate::stdout::write(format_args!($($t)*)) };
}

/// The exit status a shell reports for a process ended by SIGPIPE (128 + 13).
const BROKEN_PIPE: i32 = 141;

/// What a roll in flight does when stdout's reader has gone, once: [`on_reader_gone`].
static ON_GONE: OnceLock<Box<dyn Fn() + Send + Sync>> = OnceLock::new();
/// Whether stdout's reader has gone while a roll ran.
static GONE: AtomicBool = AtomicBool::new(false);

/// While a roll runs: when stdout's reader goes (`nodejob upgrade ... | head`), `then` is
/// called once (it stops the roll as one Ctrl-C does, and says so on stderr), and what the
/// roll would print after is dropped. Ending at once instead would leave the Lease held and
/// say nothing of the nodes between two steps.
pub(crate) fn on_reader_gone(then: impl Fn() + Send + Sync + 'static) {
    let _ = ON_GONE.set(Box::new(then));
}

/// The exit status of a command whose stdout's reader went while a roll ran
/// ([`on_reader_gone`]): [`BROKEN_PIPE`], as SIGPIPE would have ended it, once it stopped.
pub(crate) fn reader_gone() -> Option<u8> {
    GONE.load(Ordering::SeqCst).then_some(BROKEN_PIPE as u8)
}

/// Writes to stdout. When the reader has gone (`nodejob jobs | head`), the process ends at
/// once with [`BROKEN_PIPE`], as a Unix tool killed by SIGPIPE does (Rust ignores the signal
/// and `println!` would panic), unless a roll runs ([`on_reader_gone`]). Any other write
/// error ends it with a message.
pub(crate) fn write(args: std::fmt::Arguments<'_>) {
    if GONE.load(Ordering::SeqCst) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            let Some(then) = ON_GONE.get() else {
                std::process::exit(BROKEN_PIPE);
            };
            if !GONE.swap(true, Ordering::SeqCst) {
                then();
            }
            return;
        }
        eprintln!("writing to stdout: {e}");
        std::process::exit(i32::from(code::FAILED));
    }
}
