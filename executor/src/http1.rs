//! Plain-HTTP/1.1 callbacks, driven in the fire's own task.
//!
//! A callback to an `http://` receiver is one request and one answer on a
//! kept-alive connection. hyper's pooled client runs each connection as a
//! task of its own, so every callback crossed from the fire's task to the
//! connection's and back: two task wake-ups per fire, a large share of a
//! fire's CPU. Here the fire's task writes the request and reads the answer
//! itself, and idle connections wait in a [`Pool`] between fires.
//! `https://` receivers (TLS, HTTP/2) stay on hyper's client.
//!
//! The answer's head is parsed by `httparse`; the body is framed as
//! RFC 9112 says (no body for `HEAD`, 1xx, 204 and 304; `chunked`;
//! `Content-Length`; else up to the close). At most `max_output` bytes of
//! it are kept; up to [`MAX_DRAIN`] more are read so the connection can be
//! reused, beyond that it is closed.
//!
//! A request goes out at most once. An idle connection is checked before
//! reuse (a receiver that closed it has left an end-of-file to read), and a
//! request is sent again, on a new connection, only when its connection
//! failed before any byte of it was written. A connection that fails after
//! that is a failed callback, never a second request.

use std::collections::HashMap;
use std::io::{self, ErrorKind};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tower_service::Service;
use xtimer_core::steering::{self, Asked};

use crate::resolver::{BoxError, PolicyResolver};

/// Most bytes of an answer's body read past `max_output` to keep its
/// connection; a longer body closes the connection instead.
pub const MAX_DRAIN: usize = 64 * 1024;

/// Most bytes of an answer's status line and headers.
const MAX_HEAD: usize = 64 * 1024;

/// Most headers of an answer.
const MAX_HEADERS: usize = 100;

/// An answer's head, as far as a callback needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// The `Retry-After` value, if sent.
    pub retry_after: Option<String>,
    /// What the receiver asks of its timer (`X-Xtimer-Next-Run-At`, `X-Xtimer-Pause`).
    pub asked: Asked,
}

/// One answer: its head and the first `max_output` bytes of its body.
#[derive(Debug)]
pub struct Response {
    /// Status and the headers a callback reads.
    pub head: Head,
    /// The body's first bytes.
    pub body: Vec<u8>,
    /// The body could not be read whole (the connection failed in it).
    pub body_error: Option<io::Error>,
}

/// Keep-alive connections to plain-HTTP receivers, by `host:port`. Cheap
/// to share: one per callback client (`callback::Client`).
pub struct Pool {
    connector: HttpConnector<PolicyResolver>,
    max_idle_per_host: usize,
    idle_timeout: Duration,
    idle: Mutex<Idle>,
}

#[derive(Default)]
struct Idle {
    by_host: HashMap<Arc<str>, Vec<(Conn, Instant)>>,
    next_sweep: Option<Instant>,
}

/// One connection and its buffers, kept between callbacks.
struct Conn {
    stream: TcpStream,
    /// Bytes read and not yet used.
    read: Vec<u8>,
}

impl Pool {
    /// A pool connecting through `connector` (its resolver applies the
    /// target policy), keeping at most `max_idle_per_host` idle
    /// connections per host for at most `idle_timeout`.
    pub fn new(connector: HttpConnector<PolicyResolver>, max_idle_per_host: usize, idle_timeout: Duration) -> Self {
        Self { connector, max_idle_per_host, idle_timeout, idle: Mutex::default() }
    }

    /// Sends `request` (a whole HTTP/1.1 request) to `host` (`uri`'s
    /// `host:port`) and reads the answer: on an idle connection when one
    /// is open, else on a new one.
    pub async fn send(
        &self,
        host: &Arc<str>,
        uri: &Uri,
        request: &[u8],
        head_only: bool,
        max_output: usize,
    ) -> Result<Response, BoxError> {
        if let Some(mut conn) = self.checkout(host) {
            match conn.exchange(request, head_only, max_output).await {
                Ok((response, reusable)) => {
                    if reusable {
                        self.checkin(host, conn);
                    }
                    return Ok(response);
                }
                // Nothing of the request left: a new connection may send it.
                Err(Failure::NotWritten(_)) => {}
                Err(Failure::Sent(err)) => return Err(err.into()),
            }
        }
        let mut conn = self.connect(uri).await?;
        let (response, reusable) = conn.exchange(request, head_only, max_output).await.map_err(Failure::into_io)?;
        if reusable {
            self.checkin(host, conn);
        }
        Ok(response)
    }

    async fn connect(&self, uri: &Uri) -> Result<Conn, BoxError> {
        let mut connector = self.connector.clone();
        std::future::poll_fn(|cx| connector.poll_ready(cx)).await?;
        let stream = connector.call(uri.clone()).await?.into_inner();
        Ok(Conn { stream, read: Vec::with_capacity(4096) })
    }

    /// The newest idle connection to `host` its receiver has not closed.
    fn checkout(&self, host: &str) -> Option<Conn> {
        let now = Instant::now();
        let mut idle = self.idle.lock().expect("idle pool lock");
        let conns = idle.by_host.get_mut(host)?;
        while let Some((conn, since)) = conns.pop() {
            if now.duration_since(since) < self.idle_timeout && conn.is_open() {
                return Some(conn);
            }
        }
        None
    }

    /// Keeps `conn` for the next callback to `host`, and now and then
    /// closes the connections idle too long.
    fn checkin(&self, host: &Arc<str>, conn: Conn) {
        let now = Instant::now();
        let mut idle = self.idle.lock().expect("idle pool lock");
        if idle.next_sweep.is_none_or(|at| now >= at) {
            let timeout = self.idle_timeout;
            idle.by_host.retain(|_, conns| {
                conns.retain(|(_, since)| now.duration_since(*since) < timeout);
                !conns.is_empty()
            });
            idle.next_sweep = Some(now + timeout / 2);
        }
        let conns = idle.by_host.entry(host.clone()).or_default();
        if conns.len() < self.max_idle_per_host {
            conns.push((conn, now));
        }
    }

    /// Idle connections kept, over all hosts.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().expect("idle pool lock").by_host.values().map(Vec::len).sum()
    }
}

/// How an exchange failed.
enum Failure {
    /// Before any byte of the request was written: safe to send elsewhere.
    NotWritten(io::Error),
    /// After: the receiver may have the request.
    Sent(io::Error),
}

impl Failure {
    fn into_io(self) -> io::Error {
        match self {
            Failure::NotWritten(err) | Failure::Sent(err) => err,
        }
    }
}

fn invalid(why: impl Into<String>) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, why.into())
}

fn closed(what: &str) -> io::Error {
    io::Error::new(ErrorKind::UnexpectedEof, format!("the receiver closed the connection before {what}"))
}

impl Conn {
    /// Whether the receiver has not closed this idle connection: nothing
    /// to read yet. An end-of-file, an error or stray bytes retire it.
    fn is_open(&self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.try_read(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock)
    }

    /// Writes `request`, reads the answer; whether the connection can carry
    /// another request.
    async fn exchange(
        &mut self,
        request: &[u8],
        head_only: bool,
        max_output: usize,
    ) -> Result<(Response, bool), Failure> {
        let mut written = 0;
        while written < request.len() {
            match self.stream.write(&request[written..]).await {
                Ok(0) => return Err(fail(written, io::Error::from(ErrorKind::WriteZero))),
                Ok(n) => written += n,
                Err(err) => return Err(fail(written, err)),
            }
        }
        self.read.clear();
        let (head, framing, mut keep_alive) = self.read_head(head_only).await.map_err(Failure::Sent)?;
        let mut body = Vec::new();
        let body_error = match self.read_body(framing, &mut body, max_output).await {
            Ok(whole) => {
                keep_alive &= whole;
                None
            }
            Err(err) => {
                keep_alive = false;
                Some(err)
            }
        };
        // Bytes past the answer: the receiver is confused; do not reuse.
        keep_alive &= self.read.is_empty();
        Ok((Response { head, body, body_error }, keep_alive))
    }

    /// Reads bytes into `self.read`; an error at end-of-file.
    async fn fill(&mut self, what: &str) -> io::Result<()> {
        if self.read.capacity() - self.read.len() < 1024 {
            self.read.reserve(4096);
        }
        match self.stream.read_buf(&mut self.read).await? {
            0 => Err(closed(what)),
            _ => Ok(()),
        }
    }

    /// Reads up to the end of the final (non-1xx) head; leaves the rest
    /// in `self.read`.
    async fn read_head(&mut self, head_only: bool) -> io::Result<(Head, Framing, bool)> {
        loop {
            let parsed = match parse_head(&self.read, head_only)? {
                Some(parsed) => parsed,
                None if self.read.len() >= MAX_HEAD => {
                    return Err(invalid(format!("the answer's head is longer than {MAX_HEAD} bytes")))
                }
                None => {
                    self.fill("answering").await?;
                    continue;
                }
            };
            let (len, head, framing, keep_alive) = parsed;
            self.read.drain(..len);
            // 1xx: an interim answer; the final one follows.
            if (100..200).contains(&head.status) && head.status != 101 {
                continue;
            }
            return Ok((head, framing, keep_alive));
        }
    }

    /// Reads `len` bytes of the body, keeping what fits of `max_output` in
    /// `out`; `false` (the connection is not to be reused) when the body
    /// read so far, `taken`, passes `limit` first.
    async fn read_span(
        &mut self,
        mut len: u64,
        out: &mut Vec<u8>,
        max_output: usize,
        taken: &mut usize,
        limit: usize,
    ) -> io::Result<bool> {
        while len > 0 {
            if self.read.is_empty() {
                if *taken >= limit {
                    return Ok(false);
                }
                self.fill("the end of the answer").await?;
            }
            let n = self.read.len().min(usize::try_from(len).unwrap_or(usize::MAX));
            keep(out, &self.read[..n], max_output);
            self.read.drain(..n);
            len -= n as u64;
            *taken += n;
        }
        Ok(true)
    }

    /// Reads the body, keeping its first `max_output` bytes in `out`;
    /// whether it was read to its end (so the connection can be reused).
    async fn read_body(&mut self, framing: Framing, out: &mut Vec<u8>, max_output: usize) -> io::Result<bool> {
        let limit = max_output.saturating_add(MAX_DRAIN);
        let mut taken = 0usize;
        match framing {
            Framing::Empty => Ok(true),
            Framing::Length(len) => self.read_span(len, out, max_output, &mut taken, limit).await,
            Framing::ToClose => loop {
                keep(out, &self.read, max_output);
                taken += self.read.len();
                self.read.clear();
                if taken >= limit {
                    return Ok(false);
                }
                match self.stream.read_buf(&mut self.read).await? {
                    0 => return Ok(false),
                    _ => continue,
                }
            },
            Framing::Chunked => loop {
                let size = loop {
                    match chunk_size(&self.read)? {
                        Some((line, size)) => {
                            self.read.drain(..line);
                            break size;
                        }
                        None => self.fill("the end of the answer").await?,
                    }
                };
                if size == 0 {
                    // Trailers, then the empty line.
                    loop {
                        match find_crlf(&self.read) {
                            Some(0) => {
                                self.read.drain(..2);
                                return Ok(true);
                            }
                            Some(end) => {
                                self.read.drain(..end + 2);
                            }
                            None if self.read.len() > MAX_HEAD => {
                                return Err(invalid("the answer's trailers are too long"))
                            }
                            None => self.fill("the end of the answer").await?,
                        }
                    }
                }
                if !self.read_span(size, out, max_output, &mut taken, limit).await? {
                    return Ok(false);
                }
                while self.read.len() < 2 {
                    self.fill("the end of the answer").await?;
                }
                if &self.read[..2] != b"\r\n" {
                    return Err(invalid("a chunk of the answer does not end with CRLF"));
                }
                self.read.drain(..2);
            },
        }
    }
}

/// The failure of a write after `written` bytes went out.
fn fail(written: usize, err: io::Error) -> Failure {
    if written == 0 {
        Failure::NotWritten(err)
    } else {
        Failure::Sent(err)
    }
}

/// Appends what fits of `bytes` to `out`, up to `max` bytes in all.
fn keep(out: &mut Vec<u8>, bytes: &[u8], max: usize) {
    let room = max.saturating_sub(out.len());
    out.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

/// How an answer's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// No body.
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Up to the connection's close.
    ToClose,
}

/// The head at the start of `buf`: its length, the head, how its body is
/// framed and whether the connection stays open; `None` when incomplete.
fn parse_head(buf: &[u8], head_only: bool) -> io::Result<Option<(usize, Head, Framing, bool)>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(err) => return Err(invalid(format!("invalid HTTP answer: {err}"))),
    };
    let status = response.code.unwrap_or_default();
    let mut keep_alive = response.version == Some(1);
    let mut length: Option<u64> = None;
    let mut chunked = None;
    let mut retry_after = None;
    let mut asked = Asked::default();
    for header in response.headers.iter() {
        let value = header.value;
        if header.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| invalid("the answer's Content-Length is not a number"))?;
            if length.is_some_and(|m| m != n) {
                return Err(invalid("the answer has two different Content-Lengths"));
            }
            length = Some(n);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            let last = value.rsplit(|b| *b == b',').next().unwrap_or_default();
            chunked = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if header.name.eq_ignore_ascii_case("connection") {
            for token in value.split(|b| *b == b',').map(<[u8]>::trim_ascii) {
                if token.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && response.version == Some(0) {
                    keep_alive = true;
                }
            }
        } else if header.name.eq_ignore_ascii_case("retry-after") {
            retry_after = std::str::from_utf8(value).ok().map(str::to_owned);
        } else if header.name.eq_ignore_ascii_case(steering::NEXT_RUN_AT) {
            asked.next_run_at = Some(String::from_utf8_lossy(value).into_owned());
        } else if header.name.eq_ignore_ascii_case(steering::PAUSE) {
            asked.pause = Some(String::from_utf8_lossy(value).into_owned());
        }
    }
    let framing = if head_only || (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Empty
    } else {
        match (chunked, length) {
            (Some(true), _) => Framing::Chunked,
            (Some(false), _) => Framing::ToClose,
            (None, Some(0)) => Framing::Empty,
            (None, Some(n)) => Framing::Length(n),
            (None, None) => Framing::ToClose,
        }
    };
    if framing == Framing::ToClose || status == 101 {
        keep_alive = false;
    }
    Ok(Some((len, Head { status, retry_after, asked }, framing, keep_alive)))
}

/// The size line of a chunk at the start of `buf`: its length with CRLF,
/// and the size; `None` when incomplete.
fn chunk_size(buf: &[u8]) -> io::Result<Option<(usize, u64)>> {
    let Some(end) = find_crlf(buf) else {
        if buf.len() > 4096 {
            return Err(invalid("a chunk size line of the answer is too long"));
        }
        return Ok(None);
    };
    let line = &buf[..end];
    let digits = line.split(|b| *b == b';').next().unwrap_or_default().trim_ascii();
    let size = std::str::from_utf8(digits)
        .ok()
        .filter(|d| !d.is_empty() && d.len() <= 15)
        .and_then(|d| u64::from_str_radix(d, 16).ok())
        .ok_or_else(|| invalid("a chunk size of the answer is not hexadecimal"))?;
    Ok(Some((end + 2, size)))
}

fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> (usize, Head, Framing, bool) {
        parse_head(text.as_bytes(), false).unwrap().unwrap()
    }

    #[test]
    fn a_head_says_how_its_body_ends_and_whether_the_connection_stays() {
        let (_, h, f, k) = head("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        assert_eq!((h.status, f, k), (200, Framing::Length(2), true));
        let (_, _, f, k) = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
        assert_eq!((f, k), (Framing::Chunked, true));
        let (_, _, f, k) = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!((f, k), (Framing::ToClose, false));
        let (_, _, f, k) = head("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        assert_eq!((f, k), (Framing::Empty, false));
        let (_, _, f, k) = head("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n");
        assert_eq!((f, k), (Framing::Length(1), false));
        let (_, _, f, k) = head("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\n");
        assert_eq!((f, k), (Framing::Length(1), true));
        let (_, _, f, k) = head("HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n");
        assert_eq!((f, k), (Framing::Empty, true));
        let (_, h, _, _) = head("HTTP/1.1 503 Busy\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(h.retry_after.as_deref(), Some("7"));
        assert!(h.asked.is_empty());
        let (_, h, _, _) =
            head("HTTP/1.1 409 Done\r\nX-Xtimer-Next-Run-At: 1767225600000\r\nx-xtimer-pause: quota\r\n\r\n");
        assert_eq!(h.asked.next_run_at.as_deref(), Some("1767225600000"));
        assert_eq!(h.asked.pause.as_deref(), Some("quota"));
        let (_, _, f, _) = parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n", true).unwrap().unwrap();
        assert_eq!(f, Framing::Empty, "a HEAD answer has no body");
    }

    #[test]
    fn a_bad_head_is_an_error_and_a_short_one_waits_for_more() {
        assert!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-le", false).unwrap().is_none());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n", false).is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n", false).is_err());
        assert!(parse_head(b"SMTP ready\r\n\r\n", false).is_err());
    }

    #[test]
    fn chunk_sizes_are_hexadecimal_with_extensions_ignored() {
        assert_eq!(chunk_size(b"1a\r\n").unwrap(), Some((4, 26)));
        assert_eq!(chunk_size(b"A;name=v\r\nxx").unwrap(), Some((10, 10)));
        assert_eq!(chunk_size(b"1a").unwrap(), None);
        assert!(chunk_size(b"zz\r\n").is_err());
        assert!(chunk_size(b"\r\n").is_err());
    }
}
