//! One HTTP callback: the request a fire sends and how its answer reads.
//!
//! Every callback is signed (`X-Xtimer-Signature`, see
//! [`xtimer_core::signature`]) when given a secret, and may only reach
//! addresses the [`TargetPolicy`] allows: a literal address in the URL is
//! checked before sending, and a host name is checked after DNS
//! resolution, inside the client's resolver ([`PolicyResolver`]), so the
//! address checked is the address connected to and a name re-pointed at a
//! metadata service after the timer was created is still refused.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use reqwest::Method;
use xtimer_core::error::error_chain;
use xtimer_core::fire::FireKey;
use xtimer_core::signature;
use xtimer_core::target_policy::{Refusal, TargetPolicy};
use xtimer_core::timer::HttpNotify;

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
}

/// A refused callback target, as the resolver reports it through reqwest.
#[derive(Debug, thiserror::Error)]
#[error("refused: host `{host}` resolves only to denied addresses: {refusal}")]
pub struct TargetRefused {
    /// The host name.
    pub host: String,
    /// The first refusal.
    pub refusal: Refusal,
}

/// A DNS resolver that drops the addresses the policy refuses, and fails
/// with [`TargetRefused`] when none is left.
#[derive(Debug, Clone)]
pub struct PolicyResolver {
    policy: Arc<TargetPolicy>,
}

impl PolicyResolver {
    /// A resolver applying `policy`.
    pub fn new(policy: Arc<TargetPolicy>) -> Self {
        Self { policy }
    }
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refusal = None;
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| match policy.check(addr.ip()) {
                    Ok(()) => true,
                    Err(r) => {
                        refusal.get_or_insert(r);
                        false
                    }
                })
                .collect();
            match refusal {
                Some(refusal) if allowed.is_empty() => Err(Box::new(TargetRefused { host, refusal }) as _),
                _ => Ok(Box::new(allowed.into_iter()) as Addrs),
            }
        })
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

/// Builds the HTTP client with the default [`TargetPolicy`]; see [`client_with_policy`].
pub fn client(timeout_ms: u64, pool_max_idle_per_host: usize) -> reqwest::Result<reqwest::Client> {
    client_with_policy(timeout_ms, pool_max_idle_per_host, Arc::new(TargetPolicy::default()))
}

/// Builds the HTTP client: keep-alive pool, timeout, no redirects (a
/// callback that redirects elsewhere is a failure to look at, not to
/// follow, and a redirect would dodge the target policy), no proxy from
/// the environment (a proxy resolves names itself, past the policy), and
/// names resolved through [`PolicyResolver`].
pub fn client_with_policy(
    timeout_ms: u64,
    pool_max_idle_per_host: usize,
    policy: Arc<TargetPolicy>,
) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(PolicyResolver::new(policy)))
        .no_proxy()
        .timeout(Duration::from_millis(timeout_ms))
        .connect_timeout(Duration::from_millis(timeout_ms.min(5_000)))
        .pool_max_idle_per_host(pool_max_idle_per_host)
        .pool_idle_timeout(Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::none())
        .tcp_nodelay(true)
        .user_agent(concat!("xtimer/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Sends the callback of fire `key`, unsigned, and reads at most
/// `max_output` bytes of the answer (the default policy still applies,
/// through [`client`]'s resolver; literal addresses are not checked here).
pub async fn call(client: &reqwest::Client, notify: &HttpNotify, key: FireKey, max_output: usize) -> Answer {
    call_checked(client, None, notify, key, &key.to_string(), max_output, None).await
}

/// Sends the callback of fire `key`, signed when `signing` is given, and
/// reads at most `max_output` bytes of the answer; `idempotency_key` is
/// its `Idempotency-Key` header. A literal address in the
/// URL is checked against `policy` first (names are checked by the
/// client's resolver); a refusal is a failed [`Answer`] with `refused` set.
pub async fn call_checked(
    client: &reqwest::Client,
    policy: Option<&TargetPolicy>,
    notify: &HttpNotify,
    key: FireKey,
    idempotency_key: &str,
    max_output: usize,
    signing: Option<Signing<'_>>,
) -> Answer {
    if let Some(policy) = policy {
        if let Some(refusal) = literal_refusal(policy, &notify.url) {
            return Answer { delivery: Delivery::Refused, output: truncate(format!("refused: {refusal}"), max_output) };
        }
    }
    match send(client, notify, key, idempotency_key, max_output, signing).await {
        Ok(answer) => answer,
        Err(err) => {
            let delivery = if is_refusal(&err) { Delivery::Refused } else { Delivery::Unanswered };
            Answer { delivery, output: truncate(error_chain(&err), max_output) }
        }
    }
}

/// The refusal of a URL whose host is a literal address the policy denies.
fn literal_refusal(policy: &TargetPolicy, url: &str) -> Option<Refusal> {
    let url = reqwest::Url::parse(url).ok()?;
    let host = url.host_str()?;
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

async fn send(
    client: &reqwest::Client,
    n: &HttpNotify,
    key: FireKey,
    idempotency_key: &str,
    max_output: usize,
    signing: Option<Signing<'_>>,
) -> reqwest::Result<Answer> {
    let method = Method::from_bytes(n.method.as_bytes()).unwrap_or(Method::POST);
    let mut headers = HeaderMap::with_capacity(n.headers.len() + 4);
    for (name, value) in &n.headers {
        // Validated at create time; anything odd that got stored is left out.
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
            headers.insert(name, value);
        }
    }
    if !headers.contains_key(CONTENT_TYPE) {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    headers.insert("x-xtimer-timer-id", HeaderValue::from(key.timer_id));
    headers.insert("x-xtimer-run-time", HeaderValue::from(key.run_ms));
    headers.insert("idempotency-key", HeaderValue::from_str(idempotency_key).expect("digits, letters and '_'"));
    if let Some(Signing { secret, t }) = signing {
        let body = n.body.as_deref().unwrap_or_default().as_bytes();
        let value = signature::header_value(secret, t, body);
        headers.insert("x-xtimer-signature", HeaderValue::from_str(&value).expect("digits, hex and ',='"));
    }
    let mut request = client.request(method, &n.url).headers(headers);
    if let Some(timeout_ms) = n.timeout_ms {
        request = request.timeout(Duration::from_millis(timeout_ms));
    }
    if let Some(body) = &n.body {
        request = request.body(body.clone());
    }
    let mut response = request.send().await?;
    let status = response.status();
    let retry_after_ms = retry_after_ms(&response);
    let mut body = Vec::new();
    while body.len() < max_output {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break,
            // The status arrived: the host answered, whatever happens to the body.
            Err(err) if status.is_success() => return Err(err),
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(max_output)]).into_owned();
    let output =
        if text.is_empty() { format!("HTTP {}", status.as_u16()) } else { format!("HTTP {}: {text}", status.as_u16()) };
    let delivery = if status.is_success() {
        Delivery::Delivered
    } else {
        Delivery::Rejected { status: status.as_u16(), retry_after_ms }
    };
    Ok(Answer { delivery, output: truncate(output, max_output) })
}

/// Most a `Retry-After` may ask for, ms: a day.
const MAX_RETRY_AFTER_MS: u64 = 86_400_000;

/// The wait a 429 or 503 asks for with `Retry-After` (seconds, or an HTTP
/// date), ms; capped at a day.
fn retry_after_ms(response: &reqwest::Response) -> Option<u64> {
    let status = response.status().as_u16();
    if status != 429 && status != 503 {
        return None;
    }
    let value = response.headers().get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    let ms = match value.parse::<u64>() {
        Ok(secs) => secs.saturating_mul(1_000),
        Err(_) => {
            let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
            (at.timestamp_millis() - chrono::Utc::now().timestamp_millis()).max(0) as u64
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
