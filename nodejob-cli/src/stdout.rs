//! What the command prints on stdout: [`write()`], and the `outln!` and `out!` macros over it.

use std::io::Write as _;

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

/// Writes to stdout. When the reader has gone (`nodejob jobs | head`), the process ends at
/// once with [`BROKEN_PIPE`], as a Unix tool killed by SIGPIPE does (Rust ignores the signal
/// and `println!` would panic); a run in flight is then resumable as after Ctrl-C twice. Any
/// other write error ends it with a message.
pub(crate) fn write(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(BROKEN_PIPE);
        }
        eprintln!("writing to stdout: {e}");
        std::process::exit(i32::from(code::FAILED));
    }
}
