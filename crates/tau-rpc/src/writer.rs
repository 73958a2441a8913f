//! The single stdout writer. It runs on its own OS thread so that slow pipes never block the
//! async runtime, serialises events off the session's task, and batches whatever is queued
//! into one write before flushing.

use std::io::{self, BufWriter, IoSlice, Write};
use tau_protocol::SessionEvent;

use tau_protocol::{AgentEvent, AgentMessage};
use tau_session::Outbound;
use tau_store::RawJsonArray;
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

fn write_record<W: Write>(
    out: &mut BufWriter<W>,
    renderer: &mut SnapshotRenderer,
    record: Outbound,
) -> io::Result<()> {
    match record {
        Outbound::Line(line) => out.write_all(&line)?,
        Outbound::Spliced { head, array, tail } => {
            out.write_all(&head)?;
            write_array(out, &array)?;
            out.write_all(&tail)?;
        }
        Outbound::Record(record) => write_typed(out, &record)?,
        Outbound::Event(event) => {
            match event.as_ref() {
                SessionEvent::Agent(AgentEvent::MessageUpdate {
                    usage,
                    assistant_message_event,
                    ..
                }) => {
                    renderer.write_update(&mut *out, usage.as_ref(), assistant_message_event)?;
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
            write_typed(out, &event)?;
        }
    }
    out.write_all(b"\n")
}

/// Serialises one typed record straight into the buffered output. A failure other than I/O
/// is not reachable with tau's types (no non-string map keys); it is logged.
fn write_typed<W: Write, T: serde::Serialize>(
    out: &mut BufWriter<W>,
    record: &T,
) -> io::Result<()> {
    match serde_json::to_writer(&mut *out, record) {
        Err(err) if err.is_io() => Err(io::Error::other(err)),
        Err(err) => {
            tracing::error!("a record failed to serialise: {err}");
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// Writes `[e1,e2,…]`. A large array goes to the output in vectored writes straight from
/// the buffer its elements live in: copying megabytes into the buffered writer first would
/// only add a pass over them.
fn write_array<W: Write>(out: &mut BufWriter<W>, array: &RawJsonArray) -> io::Result<()> {
    if array.written_len() <= out.capacity() {
        out.write_all(b"[")?;
        for (i, element) in array.elements().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            out.write_all(element)?;
        }
        return out.write_all(b"]");
    }
    out.flush()?;
    let mut slices = Vec::with_capacity(2 * array.elements().len() + 1);
    slices.push(IoSlice::new(b"["));
    for (i, element) in array.elements().enumerate() {
        if i > 0 {
            slices.push(IoSlice::new(b","));
        }
        slices.push(IoSlice::new(element));
    }
    slices.push(IoSlice::new(b"]"));
    write_all_vectored(out.get_mut(), &mut slices)
}

/// `Write::write_all_vectored` is not stable yet; this is its loop.
fn write_all_vectored(out: &mut impl Write, mut slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    while !slices.is_empty() {
        match out.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(written) => IoSlice::advance_slices(&mut slices, written),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}
