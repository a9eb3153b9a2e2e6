//! One HTTP callback: the request a fire sends and how its answer reads.
//!
//! Every callback is signed (`X-Xtimer-Signature`, see
//! [`xtimer_core::signature`]) when given a secret, and may only reach
//! addresses the [`TargetPolicy`] allows: a literal address in the URL is
//! checked before sending, and a host name is checked after DNS
//! resolution, inside the client's resolver ([`PolicyResolver`]), so the
//! address checked is the address connected to and a name re-pointed at a
//! metadata service after the timer was created is still refused.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, HOST, USER_AGENT};
use hyper::{Method, Request, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use xtimer_core::error::error_chain;
use xtimer_core::fire::FireKey;
use xtimer_core::signature;
use xtimer_core::steering::{self, Asked};
use xtimer_core::target_policy::{Refusal, TargetPolicy};
use xtimer_core::timer::HttpNotify;
use xtimer_core::{SharedClock, SystemClock, TtlCache};

use crate::http1;
use crate::resolver::BoxError;
pub use crate::resolver::{PolicyResolver, TargetRefused};

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The receiver answered 2xx within the timeout.
    Delivered,
    /// The receiver answered with another status.
    Rejected {
        /// The HTTP status.
        status: u16,
        /// What a 429 or 503 asked with `Retry-After`, ms.
        retry_after_ms: Option<u64>,
    },
    /// No answer: a timeout, or a connection refused, reset or never made.
    Unanswered,
    /// The target policy refuses the address: retrying cannot help.
    Refused,
    /// The fire failed before any callback went out (its host's circuit is
    /// open or busy, or creating its task failed); `permanent` when
    /// retrying cannot help.
    NotSent {
        /// Retrying cannot help.
        permanent: bool,
    },
}

impl Delivery {
    /// Whether the fire succeeded.
    pub fn delivered(self) -> bool {
        self == Self::Delivered
    }

    /// Whether another attempt cannot succeed either.
    pub fn permanent(self) -> bool {
        matches!(self, Self::Refused | Self::NotSent { permanent: true })
    }
}

/// What the receiver made of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// How it ended.
    pub delivery: Delivery,
    /// `HTTP 200: <first bytes of the body>` or the error.
    pub output: String,
    /// What the receiver asked of its timer in the answer's headers.
    pub asked: Asked,
}

impl Answer {
    /// An answer that asks nothing of its timer.
    pub fn new(delivery: Delivery, output: String) -> Self {
        Self { delivery, output, asked: Asked::default() }
    }
}

/// How to sign a callback: the secret and the Unix second of signing.
#[derive(Debug, Clone, Copy)]
pub struct Signing<'a> {
    /// The app's signing secret.
    pub secret: &'a [u8],
    /// Unix seconds, the `t` of the header.
    pub t: i64,
}

/// The client could not be built (its TLS set-up failed).
#[derive(Debug, thiserror::Error)]
#[error("building the callback HTTP client failed")]
pub struct ClientError(#[source] rustls::Error);

/// The HTTP client callbacks go out on: a keep-alive pool per host over
/// HTTP/1.1 (HTTP/2 when an `https` receiver offers it; plain `http`
/// receivers through [`http1::Pool`], in the fire's own task), a default timeout
/// per callback, no redirects (a callback that redirects elsewhere is a
/// failure to look at, not to follow, and a redirect would dodge the
/// target policy), no proxy (a proxy resolves names itself, past the
/// policy), and names resolved through [`PolicyResolver`]. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    http: hyper_util::client::legacy::Client<HttpsConnector<HttpConnector<PolicyResolver>>, Full<Bytes>>,
    http1: Arc<http1::Pool>,
    timeout: Duration,
    /// Reads an HTTP-date `Retry-After` against it.
    clock: SharedClock,
}

impl Client {
    /// The client, reading `Retry-After` dates against `clock` (the
    /// system clock by default).
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Idle plain-HTTP connections kept open for the next callbacks.
    pub fn idle_http1_connections(&self) -> usize {
        self.http1.idle_count()
    }
}

/// Builds the HTTP client with the default [`TargetPolicy`]; see [`client_with_policy`].
pub fn client(timeout_ms: u64, pool_max_idle_per_host: usize) -> Result<Client, ClientError> {
    client_with_policy(timeout_ms, pool_max_idle_per_host, Arc::new(TargetPolicy::default()))
}

/// Builds the [`Client`]: callbacks time out after `timeout_ms` (unless
/// their notify sets its own), and at most `pool_max_idle_per_host`
/// connections per host are kept open between callbacks.
pub fn client_with_policy(
    timeout_ms: u64,
    pool_max_idle_per_host: usize,
    policy: Arc<TargetPolicy>,
) -> Result<Client, ClientError> {
    let mut http = HttpConnector::new_with_resolver(PolicyResolver::new(policy));
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_millis(timeout_ms.min(5_000))));
    let http1 = Arc::new(http1::Pool::new(http.clone(), pool_max_idle_per_host, IDLE_TIMEOUT));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
        .map_err(ClientError)?
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(pool_max_idle_per_host)
        .pool_idle_timeout(IDLE_TIMEOUT)
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .build(https);
    Ok(Client { http, http1, timeout: Duration::from_millis(timeout_ms), clock: Arc::new(SystemClock) })
}

/// How long an idle connection to a receiver is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// A callback's request as far as it can be made before its fire: its
/// [`Endpoint`] and its body. Made once per cron timer and reused by each
/// of its fires; a one-shot's is made at its fire, from an endpoint it may
/// share with others ([`Endpoints`]).
#[derive(Debug, Clone)]
pub struct Target {
    endpoint: Arc<Endpoint>,
    body: Bytes,
}

/// All of a callback's request but its body: the parsed URL and method,
/// the timer's headers with the defaults added, and the bulkhead key of
/// its host.
#[derive(Debug)]
pub(crate) struct Endpoint {
    uri: Option<Uri>,
    method: Method,
    /// The timer's headers and the defaults it does not set.
    headers: Box<[(HeaderName, HeaderValue)]>,
    timeout: Option<Duration>,
    host: Arc<str>,
    /// The URL names a literal address the policy denies.
    refusal: Option<Refusal>,
    /// A plain-`http` target's request line and headers.
    http1: Option<Http1Head>,
    /// What it was made from (its body left out), to tell a hash
    /// collision in [`Endpoints`].
    source: HttpNotify,
}

/// What of an [`HttpNotify`] makes its [`Endpoint`]: all but the body.
#[derive(PartialEq, Hash)]
struct EndpointKey<'a> {
    url: &'a str,
    method: &'a str,
    headers: &'a BTreeMap<String, String>,
    timeout_ms: Option<u64>,
}

impl<'a> EndpointKey<'a> {
    fn of(notify: &'a HttpNotify) -> Self {
        Self { url: &notify.url, method: &notify.method, headers: &notify.headers, timeout_ms: notify.timeout_ms }
    }
}

/// What every fire's request to a plain-`http` target starts with.
#[derive(Debug, Clone)]
struct Http1Head {
    /// The request line and the target's headers, up to the fire's own.
    bytes: Vec<u8>,
    /// A `HEAD` request: its answer has no body.
    head_only: bool,
    /// The timer's own `traceparent`, sent when the fire has none.
    traceparent: Option<HeaderValue>,
}

/// Headers each fire sets itself, over any the timer sets.
const PER_FIRE_HEADERS: [&str; 7] = [
    "x-xtimer-timer-id",
    "x-xtimer-attempt",
    "x-xtimer-run-time",
    "x-xtimer-scheduled-time",
    "idempotency-key",
    "x-xtimer-signature",
    "x-xtimer-replay",
];

/// The W3C trace context header: the attempt's span when traces are on
/// (over the timer's own), else the timer's own if it sets one.
const TRACEPARENT: &str = "traceparent";

/// Headers of the request's framing, which the client writes.
const FRAMING_HEADERS: [&str; 8] =
    ["connection", "content-length", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"];

impl Http1Head {
    /// The head of a plain-`http` `uri`'s requests; `None` for others.
    fn new(uri: &Uri, method: &Method, headers: &[(HeaderName, HeaderValue)]) -> Option<Self> {
        if uri.scheme_str() != Some("http") {
            return None;
        }
        let mut bytes = Vec::with_capacity(256);
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let path = if path.is_empty() { "/" } else { path };
        for part in [method.as_str(), " ", path, " HTTP/1.1\r\n"] {
            bytes.extend_from_slice(part.as_bytes());
        }
        if !headers.iter().any(|(name, _)| *name == HOST) {
            bytes.extend_from_slice(b"host: ");
            bytes.extend_from_slice(uri.host()?.as_bytes());
            if let Some(port) = uri.port_u16().filter(|port| *port != 80) {
                bytes.push(b':');
                bytes.extend_from_slice(itoa::Buffer::new().format(port).as_bytes());
            }
            bytes.extend_from_slice(b"\r\n");
        }
        let mut traceparent = None;
        for (name, value) in headers {
            if name == TRACEPARENT {
                traceparent = Some(value.clone());
                continue;
            }
            if PER_FIRE_HEADERS.contains(&name.as_str()) || FRAMING_HEADERS.contains(&name.as_str()) {
                continue;
            }
            push_header(&mut bytes, name.as_str(), value.as_bytes());
        }
        Some(Self { bytes, head_only: *method == Method::HEAD, traceparent })
    }
}

fn push_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// The headers a fire adds to its target's.
struct FireHeaders {
    key: FireKey,
    /// The fire's scheduled time (`X-Xtimer-Scheduled-Time`).
    scheduled_ms: i64,
    idempotency: HeaderValue,
    /// The fire's signature, or the timer's own header when unsigned.
    signature: Option<HeaderValue>,
    /// Sent again by `replayFires`.
    replay: bool,
    /// Which attempt this is (`X-Xtimer-Attempt`, 1 first).
    attempt: u32,
    /// The attempt's span (`traceparent`), when traces are on.
    traceparent: Option<HeaderValue>,
}

impl Target {
    /// The target of `notify`; a literal address in its URL is checked
    /// against `policy` (names are checked by the client's resolver).
    pub fn new(notify: &HttpNotify, policy: Option<&TargetPolicy>) -> Self {
        Self::with_endpoint(Arc::new(Endpoint::new(notify, policy)), notify)
    }

    fn with_endpoint(endpoint: Arc<Endpoint>, notify: &HttpNotify) -> Self {
        Self { endpoint, body: notify.body.clone().map(Bytes::from).unwrap_or_default() }
    }

    /// The bulkhead key of the host: `host:port`, the scheme's port when
    /// none is given; the URL itself if it does not parse.
    pub fn host(&self) -> &str {
        &self.endpoint.host
    }

    /// The timer's own callback timeout, if it sets one.
    pub fn timeout(&self) -> Option<Duration> {
        self.endpoint.timeout
    }
}

impl Endpoint {
    fn new(notify: &HttpNotify, policy: Option<&TargetPolicy>) -> Self {
        let uri = notify.url.parse::<Uri>().ok().filter(|u| u.host().is_some());
        let method = Method::from_bytes(notify.method.as_bytes()).unwrap_or(Method::POST);
        let mut headers: Vec<(HeaderName, HeaderValue)> = notify
            .headers
            .iter()
            // Validated at create time; anything odd that got stored is left out.
            .filter_map(|(name, value)| Some((HeaderName::from_bytes(name.as_bytes()).ok()?, value.parse().ok()?)))
            .collect();
        let defaults = [
            (CONTENT_TYPE, HeaderValue::from_static("application/json")),
            (ACCEPT, HeaderValue::from_static("*/*")),
            (USER_AGENT, HeaderValue::from_static(concat!("xtimer/", env!("CARGO_PKG_VERSION")))),
        ];
        for (name, value) in defaults {
            if !headers.iter().any(|(n, _)| *n == name) {
                headers.push((name, value));
            }
        }
        let host = match &uri {
            Some(u) => host_key(u),
            None => notify.url.clone(),
        };
        let refusal = match (policy, &uri) {
            (Some(policy), Some(uri)) => literal_refusal(policy, uri),
            _ => None,
        };
        let http1 = uri.as_ref().and_then(|uri| Http1Head::new(uri, &method, &headers));
        Self {
            uri,
            method,
            headers: headers.into_boxed_slice(),
            timeout: notify.timeout_ms.map(Duration::from_millis),
            host: host.into(),
            refusal,
            http1,
            source: HttpNotify {
                url: notify.url.clone(),
                method: notify.method.clone(),
                headers: notify.headers.clone(),
                body: None,
                timeout_ms: notify.timeout_ms,
                template: false,
                flow_key: None,
            },
        }
    }
}

/// Endpoints made for one-shot timers' fires, by callback: one-shots that
/// call the same URL the same way share one, whatever their bodies, so a
/// fire does not parse its URL and headers again. Bounded, short-lived.
pub(crate) struct Endpoints {
    policy: Arc<TargetPolicy>,
    hasher: RandomState,
    made: TtlCache<u64, Arc<Endpoint>>,
}

/// How many endpoints [`Endpoints`] keeps, and for how long.
const ENDPOINTS_KEPT: usize = 1024;
const ENDPOINT_TTL: Duration = Duration::from_secs(60);

impl Endpoints {
    pub(crate) fn new(policy: Arc<TargetPolicy>, clock: SharedClock) -> Self {
        Self { policy, hasher: RandomState::new(), made: TtlCache::new(ENDPOINTS_KEPT, ENDPOINT_TTL, clock) }
    }

    /// The target of `notify`, its endpoint made once for every fire that
    /// calls it the same way.
    pub(crate) fn target(&self, notify: &HttpNotify) -> Target {
        let key = EndpointKey::of(notify);
        let hash = self.hasher.hash_one(&key);
        let endpoint = match self.made.get(&hash) {
            Some(endpoint) if EndpointKey::of(&endpoint.source) == key => endpoint,
            // Another callback with the same hash: made apart.
            Some(_) => Arc::new(Endpoint::new(notify, Some(&self.policy))),
            None => {
                let endpoint = Arc::new(Endpoint::new(notify, Some(&self.policy)));
                self.made.insert(hash, endpoint.clone());
                endpoint
            }
        };
        Target::with_endpoint(endpoint, notify)
    }
}

/// `host:port` of a URL, the scheme's port when none is given.
pub(crate) fn host_key(uri: &Uri) -> String {
    let host = uri.host().unwrap_or_default();
    let port = uri.port_u16().unwrap_or(if uri.scheme_str() == Some("https") { 443 } else { 80 });
    let mut key = String::with_capacity(host.len() + 6);
    key.extend(host.chars().map(|c| c.to_ascii_lowercase()));
    key.push(':');
    key.push_str(itoa::Buffer::new().format(port));
    key
}

/// Sends the callback of fire `key`, unsigned, and reads at most
/// `max_output` bytes of the answer (the default policy still applies,
/// through [`client`]'s resolver; literal addresses are not checked here).
pub async fn call(client: &Client, notify: &HttpNotify, key: FireKey, max_output: usize) -> Answer {
    let idempotency_key = key.to_string();
    let fire = FireId {
        key,
        scheduled_ms: key.run_ms,
        idempotency_key: &idempotency_key,
        replay: false,
        attempt: 1,
        traceparent: None,
    };
    call_checked(client, &Target::new(notify, None), fire, max_output, None).await
}

/// What a callback's own headers name: its fire.
#[derive(Debug, Clone, Copy)]
pub struct FireId<'a> {
    /// The fire's key (`X-Xtimer-Timer-Id`, `X-Xtimer-Run-Time`).
    pub key: FireKey,
    /// Its scheduled time (`X-Xtimer-Scheduled-Time`).
    pub scheduled_ms: i64,
    /// Its `Idempotency-Key`.
    pub idempotency_key: &'a str,
    /// Sent again by `replayFires` (`X-Xtimer-Replay: 1`).
    pub replay: bool,
    /// Which attempt this is (`X-Xtimer-Attempt`, 1 first; a replay
    /// continues the count).
    pub attempt: u32,
    /// The W3C `traceparent` of the attempt's span, when traces are on.
    pub traceparent: Option<&'a str>,
}

/// Sends the callback of fire `key` to `target`, signed when `signing` is
/// given, and reads at most `max_output` bytes of the answer;
/// `scheduled_ms` is its scheduled time and `idempotency_key` its
/// `Idempotency-Key` header. A target whose
/// literal address the policy denies is a failed [`Answer`] with
/// `Refused`, and so is a name whose addresses are all denied.
pub async fn call_checked(
    client: &Client,
    target: &Target,
    fire: FireId<'_>,
    max_output: usize,
    signing: Option<Signing<'_>>,
) -> Answer {
    let (uri, fire) = match target.fire_headers(fire, max_output, signing) {
        Ok(ready) => ready,
        Err(refused) => return refused,
    };
    let timeout = target.endpoint.timeout.unwrap_or(client.timeout);
    let answered = match &target.endpoint.http1 {
        Some(head) => {
            let request = target.http1_request(head, &fire);
            let sent = client.http1.send(&target.endpoint.host, uri, &request, head.head_only, max_output);
            tokio::time::timeout(timeout, async {
                let response = sent.await?;
                let status = response.head.status;
                match response.body_error {
                    // The status arrived: the host answered, whatever happened to the body.
                    Some(err) if (200..300).contains(&status) => Err(err.into()),
                    _ => Ok(answer(
                        status,
                        response.head.retry_after.as_deref(),
                        response.head.asked,
                        &response.body,
                        max_output,
                        &client.clock,
                    )),
                }
            })
            .await
        }
        None => tokio::time::timeout(timeout, exchange(client, target.hyper_request(uri, fire), max_output)).await,
    };
    match answered {
        Ok(Ok(answer)) => answer,
        Ok(Err(err)) => {
            let delivery = if is_refusal(err.as_ref()) { Delivery::Refused } else { Delivery::Unanswered };
            Answer::new(delivery, truncate(error_chain(err.as_ref()), max_output))
        }
        Err(_) => Answer::new(
            Delivery::Unanswered,
            truncate(format!("callback timed out after {} ms", timeout.as_millis()), max_output),
        ),
    }
}

impl Target {
    /// The URL and the fire's own headers (`X-Xtimer-Timer-Id`,
    /// `X-Xtimer-Run-Time`, `Idempotency-Key`, the signature when
    /// `signing` is given). A target that may not be called is the failed
    /// [`Answer`] instead: a denied literal address, a URL that does not parse.
    fn fire_headers(
        &self,
        fire: FireId<'_>,
        max_output: usize,
        signing: Option<Signing<'_>>,
    ) -> Result<(&Uri, FireHeaders), Answer> {
        let FireId { key, scheduled_ms, idempotency_key, replay, attempt, traceparent } = fire;
        if let Some(refusal) = &self.endpoint.refusal {
            return Err(Answer::new(Delivery::Refused, truncate(format!("refused: {refusal}"), max_output)));
        }
        let not_sent = |why: String| {
            Answer::new(Delivery::NotSent { permanent: true }, truncate(format!("not sent: {why}"), max_output))
        };
        let Some(uri) = &self.endpoint.uri else {
            return Err(not_sent(format!("the callback URL `{}` does not parse", self.endpoint.host)));
        };
        let idempotency = HeaderValue::from_str(idempotency_key)
            .map_err(|_| not_sent(format!("`{idempotency_key}` is not a header value")))?;
        let signature = match signing {
            Some(Signing { secret, t }) => {
                // `v1` over t and the body, `v2` over the fire's headers too
                // (`X-Xtimer-Replay` on replays only), as sent below.
                let mut numbers = [itoa::Buffer::new(), itoa::Buffer::new(), itoa::Buffer::new(), itoa::Buffer::new()];
                let [id, run, scheduled, nth] = &mut numbers;
                let fields = [
                    ("idempotency-key", idempotency_key),
                    ("x-xtimer-attempt", nth.format(attempt)),
                    ("x-xtimer-run-time", run.format(key.run_ms)),
                    ("x-xtimer-scheduled-time", scheduled.format(scheduled_ms)),
                    ("x-xtimer-timer-id", id.format(key.timer_id)),
                    ("x-xtimer-replay", "1"),
                ];
                let fields = if replay { &fields[..] } else { &fields[..5] };
                let value = signature::header_value_v2(secret, t, fields, &self.body);
                Some(HeaderValue::from_str(&value).map_err(|_| not_sent("the signature".into()))?)
            }
            None => self.endpoint.headers.iter().find(|(name, _)| name == "x-xtimer-signature").map(|(_, v)| v.clone()),
        };
        let traceparent = traceparent.and_then(|value| HeaderValue::from_str(value).ok());
        Ok((uri, FireHeaders { key, scheduled_ms, idempotency, signature, replay, attempt, traceparent }))
    }

    /// The fire's request for hyper's client: the target's method, URL,
    /// headers and body, and the fire's own headers.
    fn hyper_request(&self, uri: &Uri, fire: FireHeaders) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(self.body.clone()));
        *request.method_mut() = self.endpoint.method.clone();
        *request.uri_mut() = uri.clone();
        let headers = request.headers_mut();
        headers.reserve(self.endpoint.headers.len() + 5);
        for (name, value) in self.endpoint.headers.iter() {
            headers.insert(name.clone(), value.clone());
        }
        headers.insert("x-xtimer-timer-id", HeaderValue::from(fire.key.timer_id));
        headers.insert("x-xtimer-run-time", HeaderValue::from(fire.key.run_ms));
        headers.insert("x-xtimer-scheduled-time", HeaderValue::from(fire.scheduled_ms));
        headers.insert("idempotency-key", fire.idempotency);
        headers.insert("x-xtimer-attempt", HeaderValue::from(fire.attempt));
        if let Some(signature) = fire.signature {
            headers.insert("x-xtimer-signature", signature);
        }
        if fire.replay {
            headers.insert("x-xtimer-replay", HeaderValue::from_static("1"));
        }
        if let Some(traceparent) = fire.traceparent {
            headers.insert(TRACEPARENT, traceparent);
        }
        request
    }

    /// The fire's whole HTTP/1.1 request to a plain-`http` target.
    fn http1_request(&self, head: &Http1Head, fire: &FireHeaders) -> Vec<u8> {
        let mut out = Vec::with_capacity(head.bytes.len() + 192 + self.body.len());
        out.extend_from_slice(&head.bytes);
        let mut number = itoa::Buffer::new();
        push_header(&mut out, "x-xtimer-timer-id", number.format(fire.key.timer_id).as_bytes());
        push_header(&mut out, "x-xtimer-run-time", number.format(fire.key.run_ms).as_bytes());
        push_header(&mut out, "x-xtimer-scheduled-time", number.format(fire.scheduled_ms).as_bytes());
        push_header(&mut out, "x-xtimer-attempt", number.format(fire.attempt).as_bytes());
        push_header(&mut out, "idempotency-key", fire.idempotency.as_bytes());
        if let Some(signature) = &fire.signature {
            push_header(&mut out, "x-xtimer-signature", signature.as_bytes());
        }
        if fire.replay {
            push_header(&mut out, "x-xtimer-replay", b"1");
        }
        if let Some(traceparent) = fire.traceparent.as_ref().or(head.traceparent.as_ref()) {
            push_header(&mut out, TRACEPARENT, traceparent.as_bytes());
        }
        if !self.body.is_empty() {
            push_header(&mut out, "content-length", number.format(self.body.len()).as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        out
    }
}

/// The literal address of a URL's host when the policy denies it.
fn literal_refusal(policy: &TargetPolicy, uri: &Uri) -> Option<Refusal> {
    let host = uri.host()?;
    let ip = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().ok()?;
    policy.check(ip).err()
}

/// Whether the error came from the resolver refusing every address.
fn is_refusal(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(err);
    while let Some(e) = source {
        if e.is::<TargetRefused>() {
            return true;
        }
        source = e.source();
    }
    false
}

async fn exchange(client: &Client, request: Request<Full<Bytes>>, max_output: usize) -> Result<Answer, BoxError> {
    let response = client.http.request(request).await?;
    let status = response.status();
    let (parts, mut body) = response.into_parts();
    let mut read = Vec::new();
    while read.len() < max_output {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(chunk) = frame.data_ref() {
                    read.extend_from_slice(chunk);
                }
            }
            None => break,
            // The status arrived: the host answered, whatever happens to the body.
            Some(Err(err)) if status.is_success() => return Err(err.into()),
            Some(Err(_)) => break,
        }
    }
    let retry_after = parts.headers.get(hyper::header::RETRY_AFTER).and_then(|v| v.to_str().ok());
    Ok(answer(status.as_u16(), retry_after, asked_of(&parts.headers), &read, max_output, &client.clock))
}

/// The [`Answer`] of a `status` whose body began with `body`. A 2xx is
/// delivered, and so is a 409: the receiver already has it ("already
/// done", a repeat it dropped); any other status is rejected.
fn answer(
    status: u16,
    retry_after: Option<&str>,
    asked: Asked,
    body: &[u8],
    max_output: usize,
    clock: &SharedClock,
) -> Answer {
    let text = String::from_utf8_lossy(&body[..body.len().min(max_output)]);
    let rule = if status == 409 { " (already done, counted as succeeded)" } else { "" };
    let output = if text.is_empty() { format!("HTTP {status}{rule}") } else { format!("HTTP {status}{rule}: {text}") };
    let delivery = if (200..300).contains(&status) || status == 409 {
        Delivery::Delivered
    } else {
        Delivery::Rejected { status, retry_after_ms: retry_after_ms(status, retry_after, || clock.now_ms()) }
    };
    Answer { delivery, output: truncate(output, max_output), asked }
}

/// What the headers of an answer ask of its timer.
fn asked_of(headers: &hyper::HeaderMap) -> Asked {
    let text = |name: &str| headers.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    Asked { next_run_at: text(steering::NEXT_RUN_AT), pause: text(steering::PAUSE) }
}

/// Most a `Retry-After` may ask for, ms: a day.
const MAX_RETRY_AFTER_MS: u64 = 86_400_000;

/// The wait a 429 or 503 asks for with `Retry-After` (seconds, or an HTTP
/// date, counted from `now_ms()`), ms; capped at a day.
fn retry_after_ms(status: u16, value: Option<&str>, now_ms: impl FnOnce() -> i64) -> Option<u64> {
    if status != 429 && status != 503 {
        return None;
    }
    let value = value?.trim();
    let ms = match value.parse::<u64>() {
        Ok(secs) => secs.saturating_mul(1_000),
        Err(_) => {
            let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
            (at.timestamp_millis() - now_ms()).max(0) as u64
        }
    };
    Some(ms.min(MAX_RETRY_AFTER_MS))
}

/// Cuts `text` to at most `max` bytes at a character boundary.
pub fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use xtimer_core::clock::ManualClock;

    use super::*;

    fn notify(url: &str, body: &str) -> HttpNotify {
        HttpNotify {
            url: url.into(),
            method: "POST".into(),
            headers: BTreeMap::new(),
            body: Some(body.into()),
            timeout_ms: None,
            template: false,
            flow_key: None,
        }
    }

    fn request(target: &Target) -> String {
        request_traced(target, None)
    }

    fn request_traced(target: &Target, traceparent: Option<&'static str>) -> String {
        let head = target.endpoint.http1.as_ref().expect("a plain-http target");
        let fire = FireHeaders {
            key: FireKey { timer_id: 7, run_ms: 1_000 },
            scheduled_ms: 1_000,
            idempotency: HeaderValue::from_static("7_1000"),
            signature: None,
            replay: false,
            attempt: 1,
            traceparent: traceparent.map(HeaderValue::from_static),
        };
        String::from_utf8(target.http1_request(head, &fire)).unwrap()
    }

    #[test]
    fn an_attempts_traceparent_goes_once_over_the_timers_own() {
        let span = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let plain = Target::new(&notify("http://127.0.0.1:9/hook", ""), None);
        assert!(!request(&plain).contains("traceparent"));
        assert!(request_traced(&plain, Some(span)).contains(&format!("traceparent: {span}\r\n")));
        let mut own = notify("http://127.0.0.1:9/hook", "");
        own.headers.insert("traceparent".into(), "00-11111111111111111111111111111111-2222222222222222-01".into());
        let own = Target::new(&own, None);
        assert_eq!(request(&own).matches("traceparent").count(), 1);
        assert!(request(&own).contains("traceparent: 00-1111"));
        let traced = request_traced(&own, Some(span));
        assert_eq!(traced.matches("traceparent").count(), 1, "{traced}");
        assert!(traced.contains(span));
    }

    #[test]
    fn one_shots_that_call_alike_share_an_endpoint_and_send_their_own_bodies() {
        let endpoints = Endpoints::new(Arc::new(TargetPolicy::default()), Arc::new(ManualClock::new(0)));
        let a = endpoints.target(&notify("http://127.0.0.1:9/hook", "a"));
        let b = endpoints.target(&notify("http://127.0.0.1:9/hook", "bb"));
        assert!(Arc::ptr_eq(&a.endpoint, &b.endpoint), "same URL, method and headers: one endpoint");
        assert!(request(&a).ends_with("content-length: 1\r\n\r\na"), "{}", request(&a));
        assert!(request(&b).ends_with("content-length: 2\r\n\r\nbb"), "{}", request(&b));

        let other_path = endpoints.target(&notify("http://127.0.0.1:9/other", "a"));
        assert!(!Arc::ptr_eq(&a.endpoint, &other_path.endpoint));
        assert!(request(&other_path).starts_with("POST /other HTTP/1.1\r\n"));
        let mut with_header = notify("http://127.0.0.1:9/hook", "a");
        with_header.headers.insert("x-tenant".into(), "t1".into());
        let with_header = endpoints.target(&with_header);
        assert!(!Arc::ptr_eq(&a.endpoint, &with_header.endpoint));
        assert!(request(&with_header).contains("x-tenant: t1\r\n"));
        assert!(!request(&a).contains("x-tenant"));
    }

    #[test]
    fn an_empty_body_sends_no_content_length() {
        let target = Target::new(&notify("http://127.0.0.1:9/hook", ""), None);
        assert!(request(&target).ends_with("idempotency-key: 7_1000\r\n\r\n"), "{}", request(&target));
        assert!(!request(&target).contains("content-length"));
    }

    #[test]
    fn a_409_is_done_and_says_so_and_other_refusals_are_rejected() {
        let clock: SharedClock = Arc::new(ManualClock::new(1_767_225_600_000));
        let done = answer(409, None, Asked::default(), b"dup", 100, &clock);
        assert_eq!(done.delivery, Delivery::Delivered);
        assert_eq!(done.output, "HTTP 409 (already done, counted as succeeded): dup");
        let refused = answer(401, None, Asked::default(), b"", 100, &clock);
        assert_eq!(refused.delivery, Delivery::Rejected { status: 401, retry_after_ms: None });
        assert_eq!(refused.output, "HTTP 401");
        let busy = answer(503, Some("2"), Asked::default(), b"", 100, &clock);
        assert_eq!(busy.delivery, Delivery::Rejected { status: 503, retry_after_ms: Some(2_000) });
        // An HTTP date is read against the injected clock (2026-01-01T00:00:00Z).
        let later = answer(429, Some("Thu, 01 Jan 2026 00:00:30 GMT"), Asked::default(), b"", 100, &clock);
        assert_eq!(later.delivery, Delivery::Rejected { status: 429, retry_after_ms: Some(30_000) });
        let past = answer(429, Some("Wed, 31 Dec 2025 23:00:00 GMT"), Asked::default(), b"", 100, &clock);
        assert_eq!(past.delivery, Delivery::Rejected { status: 429, retry_after_ms: Some(0) });
    }

    #[test]
    fn a_denied_literal_address_is_refused_through_a_shared_endpoint_too() {
        let endpoints = Endpoints::new(Arc::new(TargetPolicy::default()), Arc::new(ManualClock::new(0)));
        let target = endpoints.target(&notify("http://169.254.169.254/latest", "a"));
        assert!(target.endpoint.refusal.is_some());
    }
}
