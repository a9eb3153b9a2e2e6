//! A fault proxy: a TCP forwarder between one node and one server
//! (its database, or its Redis) that the chaos run can cut and heal.
//!
//! - [`Proxy::cut_silent`]: no byte moves in either direction, but every
//!   socket stays open (the node's writes are accepted by the kernel and
//!   go nowhere; no FIN, no RST): a dead link or a black-holed route. New
//!   connections are accepted and held unforwarded.
//! - [`Proxy::cut_reset`]: every connection is closed with RST (`SO_LINGER`
//!   0) on both sides, and new ones are refused (the port is closed).
//! - [`Proxy::heal`]: bytes flow again; held connections (those cut
//!   silently, and new ones accepted during the cut) carry on.
//!
//! The proxy connects to its server once per accepted connection; when the
//! server closes (a restart), the node's side is closed too, so a server
//! restart looks to the node as it would without the proxy.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the link does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Open,
    Silent,
    /// Reset: connections made before reset number `.0` are reset; while
    /// still in this mode new ones are reset too.
    Reset,
}

/// The link's state: its mode and how many resets there have been (a
/// connection made before the latest reset is reset even when the link was
/// healed before it noticed).
#[derive(Debug, Clone, Copy)]
struct State {
    mode: Mode,
    resets: u64,
}

/// Why a connection ended.
enum End {
    /// A side closed (or failed): close the other side normally.
    Closed,
    /// The link was cut with resets: close both sides with RST.
    Reset,
}

/// A proxy listening on 127.0.0.1 and forwarding to `upstream`.
pub struct Proxy {
    /// Where the node connects: `127.0.0.1:port`.
    pub addr: SocketAddr,
    state: watch::Sender<State>,
    /// Connections open now (node side accepted, not yet closed).
    open: Arc<AtomicUsize>,
    /// Whether the port is open (closed while the link is reset).
    listening: watch::Receiver<bool>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy on a free port of 127.0.0.1 forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a proxy port");
        let addr = listener.local_addr().unwrap();
        let (state, _) = watch::channel(State { mode: Mode::Open, resets: 0 });
        let open = Arc::new(AtomicUsize::new(0));
        let (listening_tx, listening) = watch::channel(true);
        let accept = {
            let (state, open, mut modes) = (state.clone(), open.clone(), state.subscribe());
            tokio::spawn(async move {
                let mut listener = Some(listener);
                loop {
                    if modes.borrow_and_update().mode == Mode::Reset {
                        // Refused: nothing listens (connections waiting in
                        // the backlog are reset) until the link is healed.
                        listener = None;
                        listening_tx.send_replace(false);
                        if modes.changed().await.is_err() {
                            return;
                        }
                        continue;
                    }
                    let bound = match &listener {
                        Some(bound) => bound,
                        None => {
                            let bound = listener.insert(rebind(addr).await);
                            listening_tx.send_replace(true);
                            bound
                        }
                    };
                    let client = tokio::select! {
                        accepted = bound.accept() => accepted,
                        changed = modes.changed() => match changed {
                            Ok(()) => continue,
                            Err(_) => return,
                        },
                    };
                    let Ok((client, _)) = client else {
                        // Out of descriptors, say: no busy loop.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let _ = client.set_nodelay(true);
                    let (watch, open) = (state.subscribe(), open.clone());
                    tokio::spawn(async move {
                        open.fetch_add(1, Ordering::Relaxed);
                        serve(client, upstream, watch).await;
                        open.fetch_sub(1, Ordering::Relaxed);
                    });
                }
            })
        };
        Self { addr, state, open, listening, accept }
    }

    /// `url` with its `host:port` replaced by this proxy's address.
    pub fn url_for(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
        let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
        let userinfo = authority.rsplit_once('@').map(|(u, _)| format!("{u}@")).unwrap_or_default();
        format!("{scheme}://{userinfo}{}{path}", self.addr)
    }

    /// Connections open through the proxy now.
    pub fn connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Stops forwarding in both directions, keeping every socket open; new
    /// connections are accepted and held. Returns the connections cut.
    pub fn cut_silent(&self) -> usize {
        self.state.send_modify(|s| s.mode = Mode::Silent);
        self.connections()
    }

    /// Resets every connection (RST on both sides) and refuses new ones
    /// (the port is closed) until [`heal`](Self::heal). Returns the
    /// connections cut.
    pub fn cut_reset(&self) -> usize {
        let n = self.connections();
        self.state.send_modify(|s| {
            s.mode = Mode::Reset;
            s.resets += 1;
        });
        n
    }

    /// Forwards again; returns once the port accepts connections.
    pub async fn heal(&self) {
        self.state.send_modify(|s| s.mode = Mode::Open);
        let mut listening = self.listening.clone();
        let _ = tokio::time::timeout(Duration::from_secs(15), listening.wait_for(|&up| up)).await;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Ends every connection still open.
        self.state.send_modify(|s| {
            s.mode = Mode::Reset;
            s.resets += 1;
        });
    }
}

/// Listens on `addr` again (a port closed while the link was reset).
async fn rebind(addr: SocketAddr) -> TcpListener {
    for _ in 0..200 {
        if let Ok(listener) = TcpListener::bind(addr).await {
            return listener;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the proxy could not listen on {addr} again");
}

/// Waits until the link is open: `Err(End::Reset)` if it was reset since
/// the connection's reset count `resets`.
async fn open(state: &mut watch::Receiver<State>, resets: u64) -> Result<(), End> {
    loop {
        let now = *state.borrow_and_update();
        if now.resets != resets {
            return Err(End::Reset);
        }
        if now.mode == Mode::Open {
            return Ok(());
        }
        if state.changed().await.is_err() {
            return Err(End::Reset);
        }
    }
}

/// Resolves when the link leaves the open mode (or was reset).
async fn closed(state: &mut watch::Receiver<State>, resets: u64) {
    loop {
        let now = *state.borrow_and_update();
        if now.mode != Mode::Open || now.resets != resets {
            return;
        }
        if state.changed().await.is_err() {
            return;
        }
    }
}

/// Serves one accepted connection until either side closes or the link is reset.
async fn serve(mut client: TcpStream, upstream: SocketAddr, mut state: watch::Receiver<State>) {
    let resets = {
        let now = *state.borrow();
        if now.mode == Mode::Reset {
            let _ = client.set_zero_linger();
            return;
        }
        now.resets
    };
    // A new connection during a silent cut waits, unforwarded, for the heal.
    if open(&mut state, resets).await.is_err() {
        let _ = client.set_zero_linger();
        return;
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        // The server is down: the node sees its connection reset.
        let _ = client.set_zero_linger();
        return;
    };
    let _ = server.set_nodelay(true);
    let end = {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        let up = pump(client_read, server_write, state.clone(), resets);
        let down = pump(server_read, client_write, state.clone(), resets);
        tokio::pin!(up, down);
        // A side's end of stream is passed on (half close) and the other
        // direction carries on; a failure or a reset ends both.
        tokio::select! {
            end = &mut up => match end { Ok(()) => down.await, e => e },
            end = &mut down => match end { Ok(()) => up.await, e => e },
        }
    };
    if let Err(End::Reset) = end {
        let _ = client.set_zero_linger();
        let _ = server.set_zero_linger();
    }
}

/// Copies `from` to `to` while the link is open; holds the bytes (reads
/// nothing more) while it is cut silently. `Ok` at `from`'s end of stream.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut state: watch::Receiver<State>,
    resets: u64,
) -> Result<(), End> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        open(&mut state, resets).await?;
        // Both are cancel-safe: a read or write dropped unfinished moved no byte.
        let n = tokio::select! {
            read = from.read(&mut buf) => read.map_err(|_| End::Closed)?,
            () = closed(&mut state, resets) => continue,
        };
        if n == 0 {
            let _ = to.shutdown().await;
            return Ok(());
        }
        let mut done = 0;
        while done < n {
            open(&mut state, resets).await?;
            tokio::select! {
                wrote = to.write(&buf[done..n]) => done += wrote.map_err(|_| End::Closed)?,
                () = closed(&mut state, resets) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server: returns every byte it reads.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    async fn roundtrip(s: &mut TcpStream, within: Duration) -> std::io::Result<bool> {
        s.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        match tokio::time::timeout(within, s.read_exact(&mut buf)).await {
            Ok(r) => r.map(|_| &buf == b"ping"),
            Err(_) => Ok(false),
        }
    }

    #[tokio::test]
    async fn the_proxy_forwards_holds_silently_resets_and_heals() {
        let proxy = Proxy::start(echo().await).await;
        assert_eq!(proxy.url_for("mysql://root@127.0.0.1:3306/xtimer"), format!("mysql://root@{}/xtimer", proxy.addr));
        assert_eq!(proxy.url_for("redis://127.0.0.1:6379"), format!("redis://{}", proxy.addr));
        let mut a = TcpStream::connect(proxy.addr).await.unwrap();
        assert!(roundtrip(&mut a, Duration::from_secs(5)).await.unwrap());

        // Silent: nothing comes back, nothing is closed; a new connection is accepted and held.
        assert_eq!(proxy.cut_silent(), 1);
        assert!(!roundtrip(&mut a, Duration::from_millis(300)).await.unwrap());
        let mut b = TcpStream::connect(proxy.addr).await.unwrap();
        b.write_all(b"ping").await.unwrap();
        proxy.heal().await;
        // The held bytes flow once healed, on both connections.
        let mut buf = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(5), a.read_exact(&mut buf)).await.unwrap().unwrap();
        assert_eq!(&buf, b"ping");
        tokio::time::timeout(Duration::from_secs(5), b.read_exact(&mut buf)).await.unwrap().unwrap();
        assert_eq!(&buf, b"ping");

        // Reset: both see a reset; new connections are refused.
        assert_eq!(proxy.cut_reset(), 2);
        let mut buf = [0u8; 4];
        let err = tokio::time::timeout(Duration::from_secs(5), a.read(&mut buf)).await.unwrap();
        assert!(err.is_err(), "a reset, not {err:?}");
        let mut refused = false;
        for _ in 0..50 {
            match TcpStream::connect(proxy.addr).await {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    refused = true;
                    break;
                }
                // The listener may not have closed yet.
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        assert!(refused, "new connections refused");
        proxy.heal().await;
        let mut d = TcpStream::connect(proxy.addr).await.unwrap();
        assert!(roundtrip(&mut d, Duration::from_secs(5)).await.unwrap());
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(proxy.connections(), 1);
    }
}
