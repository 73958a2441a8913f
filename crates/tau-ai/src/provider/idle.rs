//! [`IdleCap`]: a bound on stream silence that can be tightened while streams wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// A limit on how long a response may send nothing, shared by every request made with the
/// same options and lowered at any moment ([`IdleCap::tighten`]): waits already under way
/// then end as soon as their silence passes the new limit. The configured idle timeout still
/// applies when it is shorter. Cloning shares the cap.
#[derive(Clone, Default)]
pub struct IdleCap(Arc<Inner>);

#[derive(Default)]
struct Inner {
    /// Milliseconds; 0 is no cap.
    millis: AtomicU64,
    changed: Notify,
}

impl IdleCap {
    /// Lowers the cap to `limit` (never raises it; a zero limit is ignored).
    pub fn tighten(&self, limit: Duration) {
        let millis = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        if millis == 0 {
            return;
        }
        let _ = self
            .0
            .millis
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                (now == 0 || millis < now).then_some(millis)
            });
        self.0.changed.notify_waiters();
    }

    /// The cap, if one was set.
    pub fn get(&self) -> Option<Duration> {
        match self.0.millis.load(Ordering::Acquire) {
            0 => None,
            millis => Some(Duration::from_millis(millis)),
        }
    }

    /// The limit a wait with the configured `limit` (zero: none) has now.
    pub(crate) fn applied_to(&self, limit: Duration) -> Duration {
        match self.get() {
            Some(cap) if limit.is_zero() => cap,
            Some(cap) => cap.min(limit),
            None => limit,
        }
    }

    /// Resolves on the next [`IdleCap::tighten`]. Registered on creation, so a change
    /// between reading [`IdleCap::get`] and awaiting this is not missed.
    pub(crate) fn changed(&self) -> std::pin::Pin<Box<tokio::sync::futures::Notified<'_>>> {
        let mut notified = Box::pin(self.0.changed.notified());
        notified.as_mut().enable();
        notified
    }
}

impl std::fmt::Debug for IdleCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("IdleCap").field(&self.get()).finish()
    }
}
