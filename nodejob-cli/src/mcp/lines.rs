//! The session's stdio, one JSON-RPC message per line, between the process's stdin/stdout and
//! rmcp: [`stdio`].
//!
//! rmcp drops a line that is not JSON without a word (its `async_rw` codec, after the other
//! official SDKs; modelcontextprotocol/rust-sdk#938, for fear of error storms between two
//! peers). JSON-RPC 2.0 (§5.1, "Parse error") asks for an answer: a Response with code -32700
//! and a null `id`, since no id could be read. A client that wrote a broken line then learns
//! it at once instead of waiting for an answer that never comes; the answer is itself valid
//! JSON, so a peer that echoes it cannot start a storm. Valid JSON that is no message stays
//! rmcp's (it answers -32600, Invalid Request).

use std::future::Future;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

/// How many bytes a pipe between this framing and rmcp holds before a writer waits.
const PIPE: usize = 64 * 1024;

/// The ends rmcp serves on, in place of the process's stdin and stdout, and a future that
/// ends once everything rmcp wrote is on stdout (await it after the session, before the
/// runtime goes). `at_end` is called once when stdin ends (the client went away).
pub(crate) fn stdio(
    at_end: impl FnOnce() + Send + 'static,
) -> (DuplexStream, DuplexStream, impl Future<Output = ()>) {
    framed(tokio::io::stdin(), tokio::io::stdout(), at_end)
}

/// [`stdio`] over any reader and writer.
fn framed<R, W>(
    input: R,
    output: W,
    at_end: impl FnOnce() + Send + 'static,
) -> (DuplexStream, DuplexStream, impl Future<Output = ()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_server, server_reads) = tokio::io::duplex(PIPE);
    let (server_writes, from_server) = tokio::io::duplex(PIPE);
    let (answers, answered) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        forward_input(input, to_server, answers).await;
        at_end();
    });
    let written = tokio::spawn(merge_output(from_server, answered, output));
    let flushed = async move {
        let _ = written.await;
    };
    (server_reads, server_writes, flushed)
}

/// Passes each line of `input` to the server, except a line that is not JSON: that one is
/// answered on `answers`. Ends at the end of `input` (or once the server stops reading).
async fn forward_input<R: AsyncRead + Unpin>(
    input: R,
    mut to_server: DuplexStream,
    answers: mpsc::UnboundedSender<String>,
) {
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if let Some(answer) = parse_error(&line) {
            let _ = answers.send(answer);
            continue;
        }
        if to_server.write_all(&line).await.is_err() {
            return;
        }
    }
}

/// The answer to `line` when it is not JSON: JSON-RPC's parse error, its `id` null. `None`
/// for JSON (a message, or rmcp's to refuse) and for a blank line (nothing was sent).
fn parse_error(line: &[u8]) -> Option<String> {
    // A byte-order mark, and `\r\n` line ends, as rmcp takes them.
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.trim_ascii().is_empty() {
        return None;
    }
    let e = serde_json::from_slice::<serde::de::IgnoredAny>(line).err()?;
    if !matches!(
        e.classify(),
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof
    ) {
        return None;
    }
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": -32700, "message": format!("Parse error: {e}") },
    });
    Some(format!("{answer}\n"))
}

/// Writes to `output`, whole lines at a time, what the server writes and the parse errors'
/// answers, until the server closes its end.
async fn merge_output<W: AsyncWrite + Unpin>(
    from_server: DuplexStream,
    mut answered: mpsc::UnboundedReceiver<String>,
    mut output: W,
) {
    let mut from_server = BufReader::new(from_server);
    // A partly read line stays here when the other branch wins (read_until keeps what it read).
    let mut line = Vec::new();
    let mut answers_open = true;
    loop {
        let write = tokio::select! {
            read = from_server.read_until(b'\n', &mut line) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) if line.ends_with(b"\n") => std::mem::take(&mut line),
                Ok(_) => continue,
            },
            answer = answered.recv(), if answers_open => match answer {
                Some(answer) => answer.into_bytes(),
                None => {
                    answers_open = false;
                    continue;
                }
            },
        };
        if output.write_all(&write).await.is_err() || output.flush().await.is_err() {
            return;
        }
    }
    // The server has closed: what is left (a last line with no end) goes out too.
    if !line.is_empty() {
        let _ = output.write_all(&line).await;
    }
    let _ = output.flush().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_is_not_json_is_answered_with_the_parse_error_and_a_null_id() {
        let answer = parse_error(b"{\"jsonrpc\": \"2.0\", \"method\"\n").unwrap();
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["id"], serde_json::Value::Null);
        assert_eq!(answer["error"]["code"], -32700);
        assert_eq!(answer["jsonrpc"], "2.0");
        assert!(parse_error(b"hello\r\n").is_some());
    }

    #[test]
    fn json_and_blank_lines_go_to_the_server() {
        for line in [
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"[..],
            b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\r\n",
            b"[1, 2]\n",
            b"\n",
            b"  \r\n",
        ] {
            assert_eq!(
                parse_error(line),
                None,
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[tokio::test]
    async fn lines_pass_in_order_answers_join_whole_and_the_end_is_flushed() {
        use tokio::io::AsyncReadExt;

        let input = &b"{\"a\":1}\nnot json\n{\"b\":2}\n"[..];
        let (client_out, mut client_in) = tokio::io::duplex(PIPE);
        let (ended_tx, ended_rx) = tokio::sync::oneshot::channel();
        let (mut server_reads, mut server_writes, flushed) = framed(input, client_out, move || {
            let _ = ended_tx.send(());
        });
        // The server sees the JSON lines only, then the end of its input.
        let mut seen = String::new();
        server_reads.read_to_string(&mut seen).await.unwrap();
        assert_eq!(seen, "{\"a\":1}\n{\"b\":2}\n");
        ended_rx.await.unwrap();
        // The server answers, in two writes of one line, then closes.
        server_writes.write_all(b"{\"ok\":").await.unwrap();
        server_writes.write_all(b"true}\n").await.unwrap();
        drop(server_writes);
        flushed.await;
        let mut out = String::new();
        client_in.read_to_string(&mut out).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert!(lines.contains(&"{\"ok\":true}"), "{out}");
        let parse_error = lines.iter().find(|l| l.contains("-32700")).unwrap();
        assert!(parse_error.contains("\"id\":null"), "{parse_error}");
    }
}
