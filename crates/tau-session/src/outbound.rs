//! The one path from a session to stdout. Events and pre-serialised lines share a single
//! ordered channel, so an event emitted before a response is written before it; the writer
//! at the other end serialises events off the session's task. A writer may also take records
//! on the producer's own thread ([`DirectWrite`]) when that cannot block or reorder them.

use std::sync::Arc;

use tau_protocol::SessionEvent;
use tokio::sync::mpsc;

use crate::store::RawJsonArray;

/// A record on its way to the single stdout writer.
#[derive(Debug)]
pub enum Outbound {
    /// An event, serialised by the writer.
    Event(Box<SessionEvent>),
    /// Any other typed record (the host-tool frames), serialised by the writer.
    Record(Box<tau_protocol::rpc::OutboundRecord>),
    /// A complete JSON record without its trailing newline.
    Line(Vec<u8>),
    /// A record written as `head`, `array`, `tail`: a large array (a session's messages
    /// straight from its file) goes out without being copied into one buffer first.
    Spliced {
        head: Vec<u8>,
        array: RawJsonArray,
        tail: Vec<u8>,
    },
    /// No record: wakes the writer's thread to write out bytes a [`DirectWrite`] took but
    /// could not write without blocking.
    Drain,
}

/// A writer's way to take a record on the producer's thread, without the hand-off to its
/// own (issue 44: on a reply paced as models send it, that hand-off was a thread wake-up per
/// delta). It declines whatever it cannot take at once and in order; the sink then queues it.
pub trait DirectWrite: Send + Sync + std::fmt::Debug {
    /// Takes `record`, or gives it back to be queued. Giving it back also counts it as
    /// queued, so that no later record overtakes it.
    fn try_write(&self, record: Outbound) -> Result<(), Outbound>;
}

/// Cloneable handle feeding the writer. The channel is bounded, so a client that stops reading
/// eventually stalls the producers instead of growing memory without limit (pi does the same
/// by awaiting stdout drain).
#[derive(Debug, Clone)]
pub struct EventSink {
    tx: mpsc::Sender<Outbound>,
    direct: Option<Arc<dyn DirectWrite>>,
}

impl EventSink {
    pub fn new(tx: mpsc::Sender<Outbound>) -> Self {
        Self { tx, direct: None }
    }

    /// A sink whose records go through `direct` when it takes them, else through `tx`.
    pub fn with_direct(tx: mpsc::Sender<Outbound>, direct: Arc<dyn DirectWrite>) -> Self {
        Self {
            tx,
            direct: Some(direct),
        }
    }

    /// Hands `record` to the writer. If the writer is gone (stdout closed) the record is
    /// dropped: the process is already shutting down.
    async fn send(&self, record: Outbound) {
        if let Some(record) = self.try_direct(record) {
            let _ = self.tx.send(record).await;
        }
    }

    /// Offers `record` to the direct writer; what it declines (or all, without one) comes back
    /// to be queued.
    fn try_direct(&self, record: Outbound) -> Option<Outbound> {
        match &self.direct {
            Some(direct) => direct.try_write(record).err(),
            None => Some(record),
        }
    }

    /// Queues an event (see [`EventSink::send`]).
    pub async fn emit(&self, event: SessionEvent) {
        self.send(Outbound::Event(Box::new(event))).await;
    }

    /// Queues an event from code that cannot wait (a lock being let go): at once when the
    /// channel has room, else from a task of its own. Only for events whose place relative
    /// to the others does not matter.
    pub fn emit_now(&self, event: SessionEvent) {
        let Some(record) = self.try_direct(Outbound::Event(Box::new(event))) else {
            return;
        };
        match self.tx.try_send(record) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(outbound)) => {
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    let tx = self.tx.clone();
                    runtime.spawn(async move {
                        let _ = tx.send(outbound).await;
                    });
                }
            }
        }
    }

    /// A handle that does not keep the writer alive: the writer ends when the last
    /// [`EventSink`] is gone, and a long-lived part of the session (the store's save watch)
    /// must not hold it open.
    pub fn downgrade(&self) -> WeakEventSink {
        WeakEventSink {
            tx: self.tx.downgrade(),
            direct: self.direct.clone(),
        }
    }

    /// Queues a typed record other than an event.
    pub async fn emit_record(&self, record: tau_protocol::rpc::OutboundRecord) {
        self.send(Outbound::Record(Box::new(record))).await;
    }

    /// Queues a pre-serialised record.
    pub async fn emit_line(&self, line: Vec<u8>) {
        self.send(Outbound::Line(line)).await;
    }

    /// Queues a record whose array is spliced in as it is written.
    pub async fn emit_spliced(&self, head: Vec<u8>, array: RawJsonArray, tail: Vec<u8>) {
        self.send(Outbound::Spliced { head, array, tail }).await;
    }
}

/// An [`EventSink`] that lets the writer end (see [`EventSink::downgrade`]).
#[derive(Debug, Clone)]
pub struct WeakEventSink {
    tx: mpsc::WeakSender<Outbound>,
    direct: Option<Arc<dyn DirectWrite>>,
}

impl WeakEventSink {
    /// The sink, while the writer is there.
    pub fn upgrade(&self) -> Option<EventSink> {
        self.tx.upgrade().map(|tx| EventSink {
            tx,
            direct: self.direct.clone(),
        })
    }

    /// [`EventSink::emit_now`], while the writer is there.
    pub fn emit_now(&self, event: SessionEvent) {
        if let Some(sink) = self.upgrade() {
            sink.emit_now(event);
        }
    }
}

/// The extensions' way to the writer. Extensions load before the writer exists (a load
/// failure must stop tau before anything reaches stdout), so records they write before
/// [`ExtensionOutlet::attach`] wait in order and go out when it provides the sink.
#[derive(Debug, Default)]
pub struct ExtensionOutlet {
    state: tokio::sync::Mutex<OutletState>,
}

#[derive(Debug, Default)]
struct OutletState {
    sink: Option<EventSink>,
    waiting: Vec<tau_protocol::rpc::OutboundRecord>,
}

impl ExtensionOutlet {
    /// Connects the outlet to the writer; waiting records go out first, in order.
    pub async fn attach(&self, sink: EventSink) {
        let mut state = self.state.lock().await;
        for record in std::mem::take(&mut state.waiting) {
            sink.emit_record(record).await;
        }
        state.sink = Some(sink);
    }
}

impl ExtensionOutlet {
    /// Lets go of the writer: at the end, so that the writer can finish even while something
    /// (the stdin reader blocked on a read) still holds the extensions.
    pub async fn detach(&self) {
        self.state.lock().await.sink = None;
    }
}

impl tau_extensions::Outlet for ExtensionOutlet {
    fn write(
        &self,
        record: tau_protocol::rpc::OutboundRecord,
    ) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            // Held across the send so that records keep their order.
            let mut state = self.state.lock().await;
            match &state.sink {
                Some(sink) => sink.emit_record(record).await,
                None => state.waiting.push(record),
            }
        })
    }
}
