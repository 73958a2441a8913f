//! The single stdout writer. It runs on its own OS thread so that slow pipes never block the
//! async runtime, serialises events off the session's task, and batches whatever is queued
//! into one write before flushing.

use std::io::{self, Write};

use tau_agent::{AgentEvent, AgentMessage};
use tau_session::{Outbound, SessionEvent};
use tokio::sync::{mpsc, oneshot};

use crate::snapshot::{SnapshotRenderer, UpdateShape};

/// Writes records until every sender is gone, then flushes. On a write error (the client
/// closed stdout) it reports through `failed` and stops.
pub fn write_loop(
    mut records: mpsc::Receiver<Outbound>,
    output: impl Write,
    shape: UpdateShape,
    failed: oneshot::Sender<io::Error>,
) {
    let mut out = io::BufWriter::with_capacity(256 * 1024, output);
    let mut renderer = SnapshotRenderer::new(shape);
    let result = (|| -> io::Result<()> {
        while let Some(first) = records.blocking_recv() {
            write_record(&mut out, &mut renderer, first)?;
            while let Ok(next) = records.try_recv() {
                write_record(&mut out, &mut renderer, next)?;
            }
            out.flush()?;
        }
        out.flush()
    })();
    if let Err(err) = result {
        let _ = failed.send(err);
    }
}

fn write_record(
    out: &mut impl Write,
    renderer: &mut SnapshotRenderer,
    record: Outbound,
) -> io::Result<()> {
    match record {
        Outbound::Line(line) => out.write_all(&line)?,
        Outbound::Event(event) => {
            match event.as_ref() {
                SessionEvent::Agent(AgentEvent::MessageUpdate {
                    usage,
                    assistant_message_event,
                    ..
                }) => {
                    renderer.write_update(out, usage.as_ref(), assistant_message_event)?;
                    return out.write_all(b"\n");
                }
                SessionEvent::Agent(AgentEvent::MessageStart {
                    message: AgentMessage::Assistant(message),
                }) => renderer.start(message)?,
                SessionEvent::Agent(AgentEvent::MessageEnd {
                    message: AgentMessage::Assistant(_),
                }) => renderer.end(),
                _ => {}
            }
            if let Err(err) = serde_json::to_writer(&mut *out, &event) {
                if err.is_io() {
                    return Err(io::Error::other(err));
                }
                // Not reachable with tau's event types (no non-string map keys); never write
                // half a record, so this one is dropped and logged.
                tracing::error!("dropping an event that failed to serialise: {err}");
                return Ok(());
            }
        }
    }
    out.write_all(b"\n")
}
