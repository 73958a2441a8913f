//! The single stdout writer. Records go out in the order they are handed over, by one of two
//! hands. The runtime worker that produced a record writes it itself when it can go at once:
//! nothing handed over before it is still unwritten and the descriptor takes the bytes
//! without blocking ([`Output`]'s [`DirectWrite`]). Everything else (a backlog, a client that
//! reads slowly, large spliced arrays) goes to the writer's own OS thread, so that a slow pipe
//! never blocks the async runtime. On a reply paced as models send it, the first hand is the
//! common one, and a delta crosses no thread between the socket and stdout (issue 44).

use std::io::{self, IoSlice, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tau_protocol::SessionEvent;
use tau_protocol::{AgentEvent, AgentMessage};
use tau_session::{DirectWrite, EventSink, Outbound};
use tau_store::RawJsonArray;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::snapshot::{SnapshotRenderer, UpdateShape};

/// While this much taken on the direct path is unwritten, records go to the thread instead:
/// the bound on what a client that stops reading costs before the channel's bound applies.
const DIRECT_LIMIT: usize = 256 * 1024;

/// The thread writes what it serialised once this much has gathered (and when it has
/// nothing more queued).
const BATCH: usize = 256 * 1024;

/// The most a descriptor that polls writable is sure to take in one write without blocking
/// (POSIX's `PIPE_BUF`; Linux's is 4096).
const PIPE_BUF: usize = 4096;

/// A running writer: the thread that may block and the worker's task that may not.
pub struct Writer {
    /// For the tests, which ask the direct path itself.
    #[cfg(test)]
    direct_path: Arc<dyn DirectWrite>,
    thread: std::thread::JoinHandle<()>,
    direct: tokio::task::JoinHandle<()>,
}

/// Starts the writer of `out` (its thread, and its task on the current runtime) and returns
/// the sink that feeds it and the receiver of the first write error (the client closed its
/// end). `capacity` bounds the records queued for the thread.
pub fn start<O: Write + AsFd + Send + 'static>(
    out: O,
    shape: UpdateShape,
    capacity: usize,
) -> io::Result<(EventSink, Writer, oneshot::Receiver<io::Error>)> {
    let (tx, rx) = mpsc::channel(capacity);
    let (failed, failed_rx) = oneshot::channel();
    let output = Arc::new(Output::new(out, shape, failed, &tx));
    let thread = std::thread::Builder::new()
        .name("tau-stdout".into())
        .spawn({
            let output = Arc::clone(&output);
            move || output.write_loop(rx)
        })?;
    let direct = tokio::spawn(Arc::clone(&output).write_when_woken());
    let writer = Writer {
        #[cfg(test)]
        direct_path: Arc::clone(&output) as Arc<dyn DirectWrite>,
        thread,
        direct,
    };
    Ok((EventSink::with_direct(tx, output), writer, failed_rx))
}

impl Writer {
    /// Once every sink is gone: waits for the thread to write what is left and close the
    /// output. False when it did not end cleanly.
    pub async fn finish(self) -> bool {
        let thread = self.thread;
        let finished = tokio::task::spawn_blocking(move || thread.join()).await;
        self.direct.abort();
        matches!(finished, Ok(Ok(())))
    }
}

/// The output and everything both hands share.
pub struct Output<O> {
    state: Mutex<State<O>>,
    /// Records handed to the thread and not yet written. While there are any, a new record
    /// queues behind them.
    queued: AtomicUsize,
    /// Wakes [`Output::write_when_woken`]: the direct path took bytes.
    unwritten: Notify,
    /// The thread's channel, to wake it with [`Outbound::Drain`]. Weak: the thread ends when
    /// the last sink is gone.
    thread: mpsc::WeakSender<Outbound>,
}

struct State<O> {
    /// `None` once the thread has finished (the descriptor is closed then).
    out: Option<O>,
    /// Serialised bytes not yet written, oldest first.
    buf: Vec<u8>,
    renderer: SnapshotRenderer,
    failed: Option<oneshot::Sender<io::Error>>,
    broken: bool,
    nowait: NoWait,
}

/// Whether the descriptor takes `RWF_NOWAIT` writes (Linux 4.14 for files and sockets, later
/// kernels for pipes). Without it, a direct write is at most `PIPE_BUF` bytes into a
/// descriptor that polls writable.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NoWait {
    Untried,
    Taken,
    Refused,
}

impl<O> std::fmt::Debug for Output<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("queued", &self.queued.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<O: Write + AsFd + Send + 'static> Output<O> {
    /// `failed` hears the first write error (the client closed stdout); `thread` is the
    /// sending side of the channel [`Output::write_loop`] reads.
    pub fn new(
        out: O,
        shape: UpdateShape,
        failed: oneshot::Sender<io::Error>,
        thread: &mpsc::Sender<Outbound>,
    ) -> Self {
        Self {
            state: Mutex::new(State {
                out: Some(out),
                buf: Vec::new(),
                renderer: SnapshotRenderer::new(shape),
                failed: Some(failed),
                broken: false,
                nowait: NoWait::Untried,
            }),
            queued: AtomicUsize::new(0),
            unwritten: Notify::new(),
            thread: thread.downgrade(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<O>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The thread's part: writes what is handed over until every sender is gone, then what
    /// is left, and closes the output. On a write error it reports through `failed` and
    /// stops (later records are dropped: the client is gone).
    pub fn write_loop(&self, mut records: mpsc::Receiver<Outbound>) {
        while let Some(first) = records.blocking_recv() {
            let mut state = self.lock();
            let mut taken = 1;
            let mut result = state.take_queued(first);
            while result.is_ok()
                && let Ok(next) = records.try_recv()
            {
                taken += 1;
                result = state.take_queued(next);
            }
            let result = result.and_then(|()| state.write_buf());
            self.queued.fetch_sub(taken, Ordering::AcqRel);
            if let Err(err) = result {
                state.fail(err);
                state.out = None;
                return;
            }
        }
        let mut state = self.lock();
        if let Err(err) = state.write_buf() {
            state.fail(err);
        }
        state.out = None;
    }

    /// The worker's part of the direct path: writes what [`DirectWrite::try_write`] took, as
    /// much as goes without blocking, once the task that took it has yielded (so a burst of
    /// records becomes one write). What does not go is the thread's to write.
    pub async fn write_when_woken(self: Arc<Self>) {
        loop {
            self.unwritten.notified().await;
            // Held by the thread, which writes everything buffered before letting go, or by a
            // writer on another thread, which notifies again once it lets go.
            let Ok(mut state) = self.state.try_lock() else {
                continue;
            };
            if state.broken || state.buf.is_empty() {
                continue;
            }
            if let Err(err) = state.write_without_blocking() {
                state.fail(err);
                continue;
            }
            if state.buf.is_empty() {
                continue;
            }
            self.queued.fetch_add(1, Ordering::AcqRel);
            drop(state);
            let woken = self
                .thread
                .upgrade()
                .is_some_and(|thread| thread.try_send(Outbound::Drain).is_ok());
            // A full channel has records ahead, and the thread writes the buffer before
            // them; a closed one means the thread is at its end, where it writes it too.
            if !woken {
                self.queued.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

impl<O: Write + AsFd + Send + 'static> DirectWrite for Output<O> {
    fn try_write(&self, record: Outbound) -> Result<(), Outbound> {
        if is_small(&record)
            && self.queued.load(Ordering::Acquire) == 0
            && let Ok(mut state) = self.state.try_lock()
            // Again under the lock, which the thread holds from taking records to counting
            // them written.
            && self.queued.load(Ordering::Acquire) == 0
            && state.buf.len() < DIRECT_LIMIT
        {
            if state.broken || state.out.is_none() {
                return Ok(());
            }
            let State { buf, renderer, .. } = &mut *state;
            if let Err(err) = serialise(buf, renderer, record) {
                state.fail(err);
                return Ok(());
            }
            drop(state);
            // Every record, not only one into an empty buffer: the task may have found the
            // buffer locked by this writer and gone back to wait (T136).
            self.unwritten.notify_one();
            return Ok(());
        }
        self.queued.fetch_add(1, Ordering::AcqRel);
        Err(record)
    }
}

impl<O: Write + AsFd> State<O> {
    fn fail(&mut self, err: io::Error) {
        self.broken = true;
        self.buf = Vec::new();
        if let Some(failed) = self.failed.take() {
            let _ = failed.send(err);
        }
    }

    /// The buffer, spilling into the output whenever it is full.
    fn spill(&mut self) -> Spill<'_, O> {
        Spill {
            buf: &mut self.buf,
            out: self.out.as_mut(),
        }
    }

    /// The thread's way to take a record: serialised into the buffer, which is written out
    /// each time it fills, so that a large record goes out in pieces rather than growing the
    /// buffer to its size; a large spliced array goes out from where it lives.
    fn take_queued(&mut self, record: Outbound) -> io::Result<()> {
        if self.broken {
            return Ok(());
        }
        match record {
            Outbound::Spliced { head, array, tail } => {
                self.spill().write_all(&head)?;
                if array.written_len() <= BATCH {
                    write_array(&mut self.spill(), &array)?;
                } else {
                    self.write_buf()?;
                    if let Some(out) = &mut self.out {
                        write_array_vectored(out, &array)?;
                    }
                }
                let mut spill = self.spill();
                spill.write_all(&tail)?;
                spill.write_all(b"\n")
            }
            record => {
                let State {
                    out, buf, renderer, ..
                } = self;
                let mut spill = Spill {
                    buf,
                    out: out.as_mut(),
                };
                serialise(&mut spill, renderer, record)
            }
        }
    }

    /// Writes the whole buffer, blocking as long as the client takes: the thread's way.
    fn write_buf(&mut self) -> io::Result<()> {
        if let Some(out) = &mut self.out
            && !self.buf.is_empty()
        {
            out.write_all(&self.buf)?;
            out.flush()?;
        }
        self.buf.clear();
        Ok(())
    }

    /// Writes from the front of the buffer what the descriptor takes without blocking.
    fn write_without_blocking(&mut self) -> io::Result<()> {
        let Some(out) = &self.out else {
            return Ok(());
        };
        let mut written = 0;
        while written < self.buf.len() {
            match write_now(out.as_fd(), &self.buf[written..], &mut self.nowait)? {
                0 => break,
                n => written += n,
            }
        }
        self.buf.drain(..written);
        Ok(())
    }
}

/// One write that does not block; 0 when the descriptor has no room now.
fn write_now(fd: BorrowedFd<'_>, bytes: &[u8], nowait: &mut NoWait) -> io::Result<usize> {
    use rustix::io::{Errno, ReadWriteFlags};
    if *nowait != NoWait::Refused {
        // `u64::MAX` is the offset -1: the descriptor's own position, as `write` uses (and
        // what a pipe has).
        match rustix::io::pwritev2(fd, &[IoSlice::new(bytes)], u64::MAX, ReadWriteFlags::NOWAIT) {
            Ok(n) => {
                *nowait = NoWait::Taken;
                return Ok(n);
            }
            Err(Errno::AGAIN | Errno::INTR) => return Ok(0),
            Err(Errno::OPNOTSUPP | Errno::INVAL | Errno::NOSYS) if *nowait == NoWait::Untried => {
                *nowait = NoWait::Refused;
            }
            Err(err) => return Err(err.into()),
        }
    }
    let mut polled = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::OUT,
    )];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match rustix::event::poll(&mut polled, Some(&zero)) {
        Ok(0) | Err(rustix::io::Errno::INTR) => return Ok(0),
        Ok(_) => {}
        Err(err) => return Err(err.into()),
    }
    let revents = polled[0].revents();
    if revents.intersects(rustix::event::PollFlags::ERR | rustix::event::PollFlags::HUP) {
        return Err(io::ErrorKind::BrokenPipe.into());
    }
    if !revents.contains(rustix::event::PollFlags::OUT) {
        return Ok(0);
    }
    match rustix::io::write(fd, &bytes[..bytes.len().min(PIPE_BUF)]) {
        Ok(n) => Ok(n),
        Err(Errno::AGAIN | Errno::INTR) => Ok(0),
        Err(err) => Err(err.into()),
    }
}

/// What the direct path takes: records whose size is small and known to stay so (the
/// streaming updates, pre-serialised lines up to `PIPE_BUF` several times over). The others
/// (a run's end carries every message of it) go to the thread, which writes them in pieces
/// rather than copying them whole into the buffer.
fn is_small(record: &Outbound) -> bool {
    match record {
        Outbound::Line(line) => line.len() <= 16 * PIPE_BUF,
        Outbound::Event(event) => matches!(
            event.as_ref(),
            SessionEvent::Agent(
                AgentEvent::MessageUpdate { .. }
                    | AgentEvent::MessageStart {
                        message: AgentMessage::Assistant(_)
                    }
            )
        ),
        Outbound::Record(_) | Outbound::Spliced { .. } | Outbound::Drain => false,
    }
}

/// Writes one record and its newline into `out` (the renderer keeps the streaming message's
/// pieces between updates).
fn serialise(
    out: &mut impl Write,
    renderer: &mut SnapshotRenderer,
    record: Outbound,
) -> io::Result<()> {
    match record {
        Outbound::Drain => return Ok(()),
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
            write_typed(out, &event)?;
        }
    }
    out.write_all(b"\n")
}

/// The shared buffer as the thread writes into it: whenever what it holds and what comes
/// would pass `BATCH`, the buffer goes out first, and a piece that large by itself goes
/// straight to the output (as `BufWriter` does, without a second buffer).
struct Spill<'a, O> {
    buf: &'a mut Vec<u8>,
    out: Option<&'a mut O>,
}

impl<O: Write> Write for Spill<'_, O> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len() + data.len() > BATCH
            && let Some(out) = self.out.as_mut()
        {
            out.write_all(self.buf)?;
            self.buf.clear();
            if data.len() >= BATCH {
                out.write_all(data)?;
                return Ok(data.len());
            }
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Serialises one typed record. A failure other than I/O is not reachable with tau's types
/// (no non-string map keys); it is logged.
fn write_typed<T: serde::Serialize>(out: &mut impl Write, record: &T) -> io::Result<()> {
    match serde_json::to_writer(out, record) {
        Err(err) if err.is_io() => Err(io::Error::other(err)),
        Err(err) => {
            tracing::error!("a record failed to serialise: {err}");
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// `[e1,e2,…]`.
fn write_array(out: &mut impl Write, array: &RawJsonArray) -> io::Result<()> {
    out.write_all(b"[")?;
    for (i, element) in array.elements().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        out.write_all(element)?;
    }
    out.write_all(b"]")
}

/// A large array goes to the output in vectored writes straight from the buffer its elements
/// live in: copying megabytes into the buffer first would only add a pass over them.
fn write_array_vectored(out: &mut impl Write, array: &RawJsonArray) -> io::Result<()> {
    let mut slices = Vec::with_capacity(2 * array.elements().len() + 1);
    slices.push(IoSlice::new(b"["));
    for (i, element) in array.elements().enumerate() {
        if i > 0 {
            slices.push(IoSlice::new(b","));
        }
        slices.push(IoSlice::new(element));
    }
    slices.push(IoSlice::new(b"]"));
    write_all_vectored(out, &mut slices)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::time::{Duration, Instant};

    fn line(n: usize, width: usize) -> Vec<u8> {
        format!("{{\"n\":{n},\"pad\":\"{}\"}}", "x".repeat(width)).into_bytes()
    }

    /// Writes `count` lines through a sink whose writer has a direct path, while the client
    /// reads slowly at first (the pipe fills, the thread takes over, the direct path comes
    /// back), and returns what the client read.
    fn written_through_a_slow_client(count: usize, width: usize) -> Vec<u8> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (mut reader, pipe) = std::io::pipe().unwrap();
        let client = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            let mut all = Vec::new();
            reader.read_to_end(&mut all).unwrap();
            all
        });
        runtime.block_on(async move {
            let (sink, writer, _failed) = start(pipe, UpdateShape::Lean, 8).unwrap();
            for n in 0..count {
                sink.emit_line(line(n, width)).await;
                if n % 7 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            drop(sink);
            assert!(writer.finish().await);
        });
        client.join().unwrap()
    }

    #[test]
    fn records_keep_their_order_and_all_arrive_across_both_hands() {
        // 20,000 lines of ~1 KiB: far more than a pipe holds while the client sleeps.
        let all = written_through_a_slow_client(20_000, 1000);
        let lines: Vec<&[u8]> = all
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), 20_000);
        for (n, got) in lines.iter().enumerate() {
            assert_eq!(*got, line(n, 1000).as_slice(), "line {n}");
        }
    }

    #[test]
    fn small_records_keep_their_order_too() {
        let all = written_through_a_slow_client(50_000, 10);
        let expected: Vec<u8> = (0..50_000)
            .flat_map(|n| [line(n, 10), b"\n".to_vec()].concat())
            .collect();
        assert!(all == expected, "the output differs from the lines sent");
    }

    /// Small records written straight through from threads other than the runtime's worker,
    /// at the same time as it writes what they queued: each round's last record must reach
    /// the client with no later record to push it out. A writer that woke its task only for
    /// a record into an empty buffer lost that wake-up whenever the task found the buffer
    /// locked by another writer, and the round's tail stayed unwritten.
    #[test]
    fn records_from_several_threads_all_arrive_without_a_later_one() {
        const THREADS: usize = 4;
        const PER_THREAD: usize = 25;
        const ROUNDS: usize = 300;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (reader, pipe) = std::io::pipe().unwrap();
        let (lines_tx, lines_rx) = std::sync::mpsc::channel::<usize>();
        let client = std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(reader).lines() {
                let Ok(line) = line else { break };
                if lines_tx.send(line.len()).is_err() {
                    break;
                }
            }
        });
        let (sink, writer, _failed) = {
            let _context = runtime.enter();
            start(pipe, UpdateShape::Lean, 8).unwrap()
        };
        let mut received = 0;
        for round in 0..ROUNDS {
            let emitters: Vec<_> = (0..THREADS)
                .map(|t| {
                    let sink = sink.clone();
                    let handle = runtime.handle().clone();
                    std::thread::spawn(move || {
                        for n in 0..PER_THREAD {
                            handle.block_on(sink.emit_line(line(round * 1000 + t * 100 + n, 8)));
                        }
                    })
                })
                .collect();
            for emitter in emitters {
                emitter.join().unwrap();
            }
            let expected = (round + 1) * THREADS * PER_THREAD;
            while received < expected {
                match lines_rx.recv_timeout(Duration::from_secs(10)) {
                    Ok(_) => received += 1,
                    Err(_) => panic!(
                        "round {round}: {} of the round's records never reached the client",
                        expected - received
                    ),
                }
            }
        }
        drop(sink);
        assert!(runtime.block_on(writer.finish()));
        client.join().unwrap();
        assert!(lines_rx.try_recv().is_err(), "no record twice");
    }

    /// A pipe nobody reads, filled up.
    fn full_pipe() -> (std::io::PipeReader, std::io::PipeWriter) {
        let (reader, writer) = std::io::pipe().unwrap();
        rustix::fs::fcntl_setfl(&writer, rustix::fs::OFlags::NONBLOCK).unwrap();
        let mut filler = &writer;
        while filler.write(&[b'.'; 4096]).is_ok() {}
        rustix::fs::fcntl_setfl(&writer, rustix::fs::OFlags::empty()).unwrap();
        (reader, writer)
    }

    #[test]
    fn a_write_into_a_full_pipe_returns_at_once_either_way() {
        for way in [NoWait::Untried, NoWait::Refused] {
            let (_reader, writer) = full_pipe();
            let mut nowait = way;
            let started = Instant::now();
            let written = write_now(writer.as_fd(), b"{\"type\":\"x\"}\n", &mut nowait).unwrap();
            assert_eq!(written, 0);
            assert!(started.elapsed() < Duration::from_secs(5));
        }
    }

    #[test]
    fn without_rwf_nowait_a_write_is_at_most_pipe_buf() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let mut nowait = NoWait::Refused;
        let big = vec![b'a'; 3 * PIPE_BUF];
        let written = write_now(writer.as_fd(), &big, &mut nowait).unwrap();
        assert_eq!(written, PIPE_BUF);
        drop(writer);
        let mut got = Vec::new();
        reader.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), PIPE_BUF);
    }

    #[test]
    fn a_client_that_closed_its_end_is_reported_and_the_direct_path_drops_records() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (reader, pipe) = std::io::pipe().unwrap();
            drop(reader);
            let (sink, writer, failed_rx) = start(pipe, UpdateShape::Lean, 8).unwrap();
            sink.emit_line(line(0, 10)).await;
            let err = tokio::time::timeout(Duration::from_secs(10), failed_rx)
                .await
                .expect("the failure is reported")
                .unwrap();
            assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
            // Taken and dropped, not queued behind a writer that is gone.
            assert!(
                writer
                    .direct_path
                    .try_write(Outbound::Line(line(1, 10)))
                    .is_ok()
            );
            drop(sink);
            assert!(writer.finish().await);
        });
    }
}
