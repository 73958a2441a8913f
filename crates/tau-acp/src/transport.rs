//! The stdio transport: one thread reads stdin into lines, one thread owns the protocol's
//! stdout and writes the lines the connection sends. The connection sees a stream of lines
//! and a sink of lines (the SDK's `Lines`), so no async stdio adapter is needed and nothing
//! but the connection ever writes the protocol's output.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use futures::channel::mpsc as fmpsc;

/// What [`start`] gives the connection, and the writer thread to wait for at the end.
pub struct Stdio {
    /// Lines read from the input, until its end.
    pub incoming: fmpsc::UnboundedReceiver<std::io::Result<String>>,
    /// Where the connection's lines go.
    pub outgoing: std::sync::mpsc::Sender<String>,
    /// The writer thread: ends when every sender is dropped and what was queued is written.
    pub writer: JoinHandle<()>,
    /// Set when a write failed (the client went away).
    pub failed: Arc<AtomicBool>,
}

/// Starts the reader and writer threads.
pub fn start<I, O>(input: I, output: O) -> std::io::Result<Stdio>
where
    I: Read + Send + 'static,
    O: Write + Send + 'static,
{
    let (in_tx, incoming) = fmpsc::unbounded();
    std::thread::Builder::new()
        .name("tau-acp-stdin".into())
        .spawn(move || read_lines(input, &in_tx))?;
    let (outgoing, out_rx) = std::sync::mpsc::channel::<String>();
    let failed = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&failed);
    let writer = std::thread::Builder::new()
        .name("tau-acp-stdout".into())
        .spawn(move || write_lines(&out_rx, output, &flag))?;
    Ok(Stdio {
        incoming,
        outgoing,
        writer,
        failed,
    })
}

/// Splits the input on LF; a line that is not UTF-8 is passed on with replacement
/// characters, so the connection answers it with a parse error instead of tau stopping.
fn read_lines(input: impl Read, tx: &fmpsc::UnboundedSender<std::io::Result<String>>) {
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {
                while matches!(line.last(), Some(b'\n' | b'\r')) {
                    line.pop();
                }
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let text = String::from_utf8_lossy(&line).into_owned();
                if tx.unbounded_send(Ok(text)).is_err() {
                    return;
                }
            }
            Err(err) => {
                tracing::warn!("stdin read failed, treating it as closed: {err}");
                return;
            }
        }
    }
}

/// Writes each line with its LF; lines that queued up meanwhile go out in one flush.
fn write_lines(rx: &std::sync::mpsc::Receiver<String>, output: impl Write, failed: &AtomicBool) {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, output);
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(line) = next {
            if out.write_all(line.as_bytes()).is_err() || out.write_all(b"\n").is_err() {
                failed.store(true, Ordering::Release);
                return;
            }
            next = rx.try_recv().ok();
        }
        if out.flush().is_err() {
            failed.store(true, Ordering::Release);
            return;
        }
    }
}

/// The connection's sink of lines over the writer thread's channel.
pub fn line_sink(
    tx: std::sync::mpsc::Sender<String>,
) -> impl futures::Sink<String, Error = std::io::Error> + Send + 'static {
    futures::sink::unfold(tx, async |tx, line: String| {
        tx.send(line)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok::<_, std::io::Error>(tx)
    })
}
