//! [`Gather`]: how the group commits take their batches.

use std::future::Future;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

/// Takes batches from a channel for a group commit: waits for the first
/// item, then takes what arrives within the linger after it, until the
/// batch holds `max` (counted by `size`: one per item unless told). Claims,
/// results and task creates each write what one gather took in one round
/// trip, so the database commits once for many callers.
#[derive(Debug)]
pub struct Gather<T, R = mpsc::Receiver<T>> {
    rx: R,
    max: usize,
    linger: Duration,
    /// An item's count towards `max`; one each when `None`.
    size: Option<fn(&T) -> usize>,
}

impl<T, R: Inbox<T>> Gather<T, R> {
    /// Batches of up to `max` items, lingering `linger` after the first.
    pub fn new(rx: R, max: usize, linger: Duration) -> Self {
        Self { rx, max: max.max(1), linger, size: None }
    }

    /// The same, an item counting `size(item)` towards `max` (an item that
    /// is itself a batch).
    pub fn sized(rx: R, max: usize, linger: Duration, size: fn(&T) -> usize) -> Self {
        Self { size: Some(size), ..Self::new(rx, max, linger) }
    }

    /// Appends the next batch to `batch`; false when every sender is gone
    /// and nothing is left.
    pub async fn next(&mut self, batch: &mut Vec<T>) -> bool {
        self.take(batch, std::future::pending()).await
    }

    /// [`Gather::next`], or false at once when `shutdown` is cancelled
    /// while waiting for the first item.
    pub async fn next_until(&mut self, batch: &mut Vec<T>, shutdown: &CancellationToken) -> bool {
        self.take(batch, shutdown.cancelled()).await
    }

    /// The first items, unless `stop` ends the wait for them, then what
    /// arrives within the linger.
    async fn take(&mut self, batch: &mut Vec<T>, stop: impl Future<Output = ()>) -> bool {
        let (start, first) = (batch.len(), self.first_take());
        let got = tokio::select! {
            _ = stop => return false,
            got = self.rx.recv_many(batch, first) => got,
        };
        if got == 0 {
            return false;
        }
        self.linger_after(start, batch).await;
        true
    }

    /// Refuses new items; those queued are still taken.
    pub fn close(&mut self) {
        self.rx.close();
    }

    /// Whether new items are refused (closed, or every sender gone).
    pub fn is_closed(&self) -> bool {
        self.rx.is_closed()
    }

    /// How many items the first take may hold: all that wait, up to `max`,
    /// when each counts one; else one, so the sizes are counted.
    fn first_take(&self) -> usize {
        if self.size.is_none() {
            self.max
        } else {
            1
        }
    }

    /// Takes what arrives within the linger after the items from `start`
    /// on, until they count `max`: what waits already, then, if there is
    /// room, what came by the linger's end. One wake-up per batch, not one
    /// per item that joins it (at a steady rate the senders would otherwise
    /// wake this task, and often a parked worker thread, per item). A
    /// closed channel gets nothing more, so nothing is waited for (a
    /// shutdown's last flush).
    async fn linger_after(&mut self, start: usize, batch: &mut Vec<T>) {
        let until = Instant::now() + self.linger;
        let held = self.drain(batch, self.count(&batch[start..]));
        if held < self.max && !self.rx.is_closed() {
            sleep_until(until).await;
            self.drain(batch, held);
        }
    }

    /// Takes what waits, without waiting, until the batch counts `max`;
    /// what it counts then.
    fn drain(&mut self, batch: &mut Vec<T>, mut held: usize) -> usize {
        while held < self.max {
            match self.rx.try_recv() {
                Some(item) => {
                    held += self.count(std::slice::from_ref(&item));
                    batch.push(item);
                }
                None => break,
            }
        }
        held
    }

    /// What `items` count towards `max`.
    fn count(&self, items: &[T]) -> usize {
        self.size.map_or(items.len(), |size| items.iter().map(size).sum())
    }
}

/// A channel's receiving end, bounded or not, as [`Gather`] reads it.
pub trait Inbox<T> {
    /// Waits for items and takes up to `limit` of those waiting; 0 when
    /// every sender is gone and nothing is left.
    fn recv_many<'a>(&'a mut self, buffer: &'a mut Vec<T>, limit: usize) -> impl Future<Output = usize> + Send + 'a;
    /// One item waiting, if any, without waiting.
    fn try_recv(&mut self) -> Option<T>;
    /// Refuses new items.
    fn close(&mut self);
    /// Whether new items are refused.
    fn is_closed(&self) -> bool;
}

impl<T: Send> Inbox<T> for mpsc::Receiver<T> {
    fn recv_many<'a>(&'a mut self, buffer: &'a mut Vec<T>, limit: usize) -> impl Future<Output = usize> + Send + 'a {
        mpsc::Receiver::recv_many(self, buffer, limit)
    }
    fn try_recv(&mut self) -> Option<T> {
        mpsc::Receiver::try_recv(self).ok()
    }
    fn close(&mut self) {
        mpsc::Receiver::close(self)
    }
    fn is_closed(&self) -> bool {
        mpsc::Receiver::is_closed(self)
    }
}

impl<T: Send> Inbox<T> for mpsc::UnboundedReceiver<T> {
    fn recv_many<'a>(&'a mut self, buffer: &'a mut Vec<T>, limit: usize) -> impl Future<Output = usize> + Send + 'a {
        mpsc::UnboundedReceiver::recv_many(self, buffer, limit)
    }
    fn try_recv(&mut self) -> Option<T> {
        mpsc::UnboundedReceiver::try_recv(self).ok()
    }
    fn close(&mut self) {
        mpsc::UnboundedReceiver::close(self)
    }
    fn is_closed(&self) -> bool {
        mpsc::UnboundedReceiver::is_closed(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_batch_is_what_arrives_within_the_linger_up_to_max() {
        let (tx, rx) = mpsc::channel(100);
        let mut gather = Gather::new(rx, 3, Duration::from_millis(10));
        let sender = tokio::spawn(async move {
            for i in 0..5 {
                tx.send(i).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            tx.send(5).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            tx.send(6).await.unwrap();
        });
        let mut batch = Vec::new();
        assert!(gather.next(&mut batch).await);
        assert_eq!(batch, [0, 1, 2], "full at max");
        batch.clear();
        let start = Instant::now();
        assert!(gather.next(&mut batch).await);
        assert_eq!(batch, [3, 4, 5], "5 came within the linger");
        assert_eq!(start.elapsed(), Duration::from_millis(10), "taken once, at the linger's end");
        batch.clear();
        assert!(gather.next(&mut batch).await);
        assert_eq!(batch, [6], "alone: the linger ran out");
        sender.await.unwrap();
        batch.clear();
        assert!(!gather.next(&mut batch).await, "every sender gone");
    }

    #[tokio::test(start_paused = true)]
    async fn sized_items_count_by_their_size_and_shutdown_stops_the_wait() {
        let (tx, rx) = mpsc::channel(100);
        let mut gather = Gather::sized(rx, 4, Duration::from_millis(10), |v: &Vec<u8>| v.len());
        tx.send(vec![1, 2, 3]).await.unwrap();
        tx.send(vec![4, 5]).await.unwrap();
        tx.send(vec![6]).await.unwrap();
        let mut batch = Vec::new();
        assert!(gather.next(&mut batch).await);
        assert_eq!(batch, [vec![1, 2, 3], vec![4, 5]]);
        let shutdown = CancellationToken::new();
        batch.clear();
        assert!(gather.next_until(&mut batch, &shutdown).await);
        assert_eq!(batch, [vec![6]]);
        shutdown.cancel();
        assert!(!gather.next_until(&mut batch, &shutdown).await);
        gather.close();
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_channel_is_drained_without_waiting_out_the_linger() {
        let (tx, rx) = mpsc::channel(100);
        let mut gather = Gather::new(rx, 10, Duration::from_millis(50));
        tx.send(1).await.unwrap();
        tx.send(2).await.unwrap();
        gather.close();
        let start = Instant::now();
        let mut batch = Vec::new();
        assert!(gather.next(&mut batch).await);
        assert_eq!(batch, [1, 2]);
        assert_eq!(start.elapsed(), Duration::ZERO, "nothing more can come");
        batch.clear();
        assert!(!gather.next(&mut batch).await, "closed and empty");
    }
}
