//! The HTTP listener's limits against starvation before authentication (docs/security.md,
//! "Limits"): at most [`MAX_CONNECTIONS`] connections, at most [`MAX_UNAUTHENTICATED_PER_PEER`]
//! from one address that have not yet sent a request with a valid token, each of those closed
//! after [`AUTH_TIMEOUT`] (a request's head read slowly, or never), and any connection closed
//! after [`IDLE_TIMEOUT`] without a byte either way. When a limit is reached the oldest
//! unauthenticated connection is shed; a connection that authenticated is never shed, so token
//! holders keep being served while anonymous sockets pile up. One token authenticates at most
//! [`MAX_CONNECTIONS_PER_TOKEN`] connections at once (issue 52, point 2: one token's 512
//! keep-alive connections held every slot), and a connection whose token is found revoked is
//! authenticated no more ([`ConnSlot::revoked`]).

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// The most connections served at once.
pub const MAX_CONNECTIONS: usize = 512;
/// The most connections one token authenticates at once: a request with that token on another
/// connection is refused (429) and the connection stays unauthenticated (so it can be shed).
pub const MAX_CONNECTIONS_PER_TOKEN: usize = 32;
/// The most unauthenticated connections from one IP address.
pub const MAX_UNAUTHENTICATED_PER_PEER: usize = 64;
/// How long a connection may take to send a request with a valid token.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may stay silent both ways (an open SSE stream sends a keep-alive
/// every 15 seconds, so it stays).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// One accepted connection, as the registry sees it.
struct Slot {
    id: u64,
    peer: IpAddr,
    opened: Instant,
    /// Milliseconds since the registry started, at the last byte read or written.
    last: AtomicU64,
    authenticated: AtomicBool,
    /// The hash of the token that authenticated it, if one did.
    token: Mutex<Option<String>>,
    kill: CancellationToken,
}

impl Slot {
    /// Whether the token `hash` authenticated this connection.
    fn holds(&self, hash: &str) -> bool {
        self.token.lock().is_ok_and(|t| t.as_deref() == Some(hash))
    }

    /// Sets (or clears) the token that authenticated this connection.
    fn set_token(&self, hash: Option<&str>) {
        if let Ok(mut t) = self.token.lock() {
            *t = hash.map(str::to_string);
        }
        self.authenticated.store(hash.is_some(), Ordering::Relaxed);
    }
}

/// The open connections.
pub struct Registry {
    slots: Mutex<Vec<Arc<Slot>>>,
    start: Instant,
    next: AtomicU64,
}

impl Registry {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Registers a new connection, shedding the oldest unauthenticated one (of its peer, then of
    /// all) when a limit is reached; None when every slot is held by authenticated clients.
    fn admit(&self, peer: IpAddr) -> Option<Arc<Slot>> {
        let mut slots = self.slots.lock().ok()?;
        let live = |s: &&Arc<Slot>| !s.kill.is_cancelled();
        let anonymous = |s: &&Arc<Slot>| live(s) && !s.authenticated.load(Ordering::Relaxed);
        let of_peer = slots
            .iter()
            .filter(anonymous)
            .filter(|s| s.peer == peer)
            .count();
        if of_peer >= MAX_UNAUTHENTICATED_PER_PEER {
            if let Some(s) = slots.iter().filter(anonymous).find(|s| s.peer == peer) {
                s.kill.cancel();
            }
        }
        if slots.iter().filter(live).count() >= MAX_CONNECTIONS {
            slots.iter().find(anonymous)?.kill.cancel();
        }
        let slot = Arc::new(Slot {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            peer,
            opened: Instant::now(),
            last: AtomicU64::new(self.now_ms()),
            authenticated: AtomicBool::new(false),
            token: Mutex::new(None),
            kill: CancellationToken::new(),
        });
        slots.push(Arc::clone(&slot));
        Some(slot)
    }

    /// Marks `slot` as authenticated by the token `hash`, unless that token already
    /// authenticates [`MAX_CONNECTIONS_PER_TOKEN`] other live connections.
    fn authenticate(&self, slot: &Slot, hash: &str) -> bool {
        let Ok(slots) = self.slots.lock() else {
            return false;
        };
        let others = slots
            .iter()
            .filter(|s| s.id != slot.id && !s.kill.is_cancelled() && s.holds(hash))
            .count();
        let ok = others < MAX_CONNECTIONS_PER_TOKEN;
        if ok {
            slot.set_token(Some(hash));
        }
        ok
    }

    fn remove(&self, id: u64) {
        if let Ok(mut slots) = self.slots.lock() {
            slots.retain(|s| s.id != id);
        }
    }

    /// Closes the connections past their timeouts.
    fn reap(&self) {
        let now = self.now_ms();
        let idle = u64::try_from(IDLE_TIMEOUT.as_millis()).unwrap_or(u64::MAX);
        if let Ok(slots) = self.slots.lock() {
            for s in slots.iter() {
                let anonymous = !s.authenticated.load(Ordering::Relaxed);
                let silent = now.saturating_sub(s.last.load(Ordering::Relaxed)) > idle;
                if (anonymous && s.opened.elapsed() > AUTH_TIMEOUT) || silent {
                    s.kill.cancel();
                }
            }
        }
    }
}

/// A TCP listener that applies the limits; [`GuardedListener::reaper`] applies the timeouts.
pub struct GuardedListener {
    inner: TcpListener,
    registry: Arc<Registry>,
}

impl GuardedListener {
    /// Wraps a bound listener.
    pub fn new(inner: TcpListener) -> GuardedListener {
        GuardedListener {
            inner,
            registry: Arc::new(Registry {
                slots: Mutex::new(Vec::new()),
                start: Instant::now(),
                next: AtomicU64::new(0),
            }),
        }
    }

    /// The task that closes connections past their timeouts, once a second, until `stop`.
    pub fn reaper(&self, stop: CancellationToken) -> impl Future<Output = ()> + Send + 'static {
        let registry = Arc::clone(&self.registry);
        async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => registry.reap(),
                }
            }
        }
    }
}

impl Listener for GuardedListener {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Conn, SocketAddr) {
        loop {
            match self.inner.accept().await {
                Ok((tcp, peer)) => {
                    // Every slot held by an authenticated client: the new one is closed.
                    if let Some(slot) = self.registry.admit(peer.ip()) {
                        let killed = Box::pin(slot.kill.clone().cancelled_owned());
                        let registry = Arc::clone(&self.registry);
                        return (
                            Conn {
                                tcp,
                                slot,
                                registry,
                                killed,
                            },
                            peer,
                        );
                    }
                }
                // Out of descriptors or a connection reset before accept: wait a little.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// An accepted connection: reads and writes mark it active; once shed or timed out, both fail.
pub struct Conn {
    tcp: TcpStream,
    slot: Arc<Slot>,
    registry: Arc<Registry>,
    killed: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl Conn {
    /// The error of a shed or timed-out connection, if it is one.
    fn shed(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        self.killed
            .as_mut()
            .poll(cx)
            .is_ready()
            .then(|| io::Error::new(io::ErrorKind::TimedOut, "connection shed or timed out"))
    }

    fn touch(&self) {
        self.slot
            .last
            .store(self.registry.now_ms(), Ordering::Relaxed);
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.registry.remove(self.slot.id);
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(e) = this.shed(cx) {
            return Poll::Ready(Err(e));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut this.tcp).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.touch();
        }
        r
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(e) = this.shed(cx) {
            return Poll::Ready(Err(e));
        }
        let r = Pin::new(&mut this.tcp).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

/// The connection a request came on, for the token check to mark it authenticated.
#[derive(Clone)]
pub struct ConnSlot(Arc<Slot>, Arc<Registry>);

impl ConnSlot {
    /// Marks the connection as one that sent the valid token `hash`: it is never shed. False
    /// (and the connection left as it was) when that token already authenticates
    /// [`MAX_CONNECTIONS_PER_TOKEN`] other connections.
    pub fn authenticated(&self, hash: &str) -> bool {
        self.1.authenticate(&self.0, hash)
    }

    /// Marks the connection as unauthenticated (its token was found unknown or revoked): it
    /// may be shed again, and the reaper closes it as one past its authentication timeout.
    pub fn revoked(&self) {
        self.0.set_token(None);
    }

    /// The address of the peer.
    pub fn peer(&self) -> IpAddr {
        self.0.peer
    }
}

impl Connected<IncomingStream<'_, GuardedListener>> for ConnSlot {
    fn connect_info(stream: IncomingStream<'_, GuardedListener>) -> Self {
        let io = stream.io();
        ConnSlot(Arc::clone(&io.slot), Arc::clone(&io.registry))
    }
}
