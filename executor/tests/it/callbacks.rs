//! Signed callbacks and the callback target policy, against a real
//! receiver on loopback and a real SQLite file.

use std::sync::Arc;
use std::time::Duration;

use xtimer_core::config::{AuthConfig, CallbackConfig, Secret};
use xtimer_core::fire::FireStatus;
use xtimer_core::signature::{self, VerifyError};
use xtimer_core::target_policy::TargetPolicy;
use xtimer_core::timer::{MisfirePolicy, RetryPolicy, TimerStatus};
use xtimer_core::SharedClock;
use xtimer_executor::secrets::SECRET_TTL;
use xtimer_executor::{AppSecrets, Callbacks};
use xtimer_store::AuthRepo;

use crate::helpers::{reconciler_config, Harness, T0};

const TOLERANCE: Duration = Duration::from_secs(300);

fn retrying() -> RetryPolicy {
    RetryPolicy { max_attempts: 3, backoff_ms: 10, no_retry_statuses: None }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_callback_carries_a_signature_the_receiver_verifies() {
    let callbacks =
        Callbacks { policy: Arc::new(TargetPolicy::default()), secrets: Arc::new(AppSecrets::fixed("s3cret")) };
    let h = Harness::start_with(reconciler_config(), callbacks).await;
    let t = h.timer("signed", TimerStatus::Enabled, MisfirePolicy::FireAll).await;
    let keys = h.fires(&t, &[-20_000, -10_000]).await;
    h.reconciler.run_once().await.unwrap();
    h.receiver.wait_for(&keys).await;

    let signed = h.receiver.signed();
    assert_eq!(signed.len(), 2);
    for (header, body) in &signed {
        assert_eq!(&body[..], b"{}");
        assert!(header.starts_with(&format!("t={},v1=", T0 / 1000)), "{header}");
        assert_eq!(signature::verify(b"s3cret", header, body, TOLERANCE, T0 / 1000), Ok(()));
        assert_eq!(signature::verify(b"wrong", header, body, TOLERANCE, T0 / 1000), Err(VerifyError::Mismatch));
        assert_eq!(
            signature::verify(b"s3cret", header, b"{\"x\":1}", TOLERANCE, T0 / 1000),
            Err(VerifyError::Mismatch)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apps_own_secret_wins_and_the_generated_server_secret_is_kept() {
    let h = Harness::start(reconciler_config()).await;
    let db: Arc<dyn AuthRepo> = h.repo.clone();
    let clock: SharedClock = h.clock.clone();
    let none = AuthConfig::default();
    let first = Callbacks::load(&CallbackConfig::default(), &none, db.clone(), &clock).await.unwrap();
    let again = Callbacks::load(&CallbackConfig::default(), &none, db.clone(), &clock).await.unwrap();
    let server = first.secrets.default_secret().to_string();
    assert_eq!(server.len(), 64);
    assert_eq!(again.secrets.default_secret(), server, "generated once, then read back");
    assert_eq!(&*first.secrets.secret_for("it").await, server, "no app secret yet");

    db.issue_token("ops", "hash", "ops-secret", T0).await.unwrap();
    assert_eq!(&*again.secrets.secret_for("ops").await, "ops-secret");

    let configured = CallbackConfig { signing_secret: Secret::new("conf"), ..CallbackConfig::default() };
    let mut auth = AuthConfig::default();
    auth.apps.insert(
        "ops".into(),
        xtimer_core::config::AppCredentials { token: Secret::new("t"), secret: Secret::new("static") },
    );
    let c = Callbacks::load(&configured, &auth, db, &clock).await.unwrap();
    assert_eq!(c.secrets.default_secret(), "conf");
    assert_eq!(&*c.secrets.secret_for("ops").await, "static", "configuration wins over the database");
    assert_eq!(&*c.secrets.secret_for("it").await, "conf");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_issued_elsewhere_is_used_once_the_cached_read_expires() {
    let h = Harness::start(reconciler_config()).await;
    let db: Arc<dyn AuthRepo> = h.repo.clone();
    let clock: SharedClock = h.clock.clone();
    let c = Callbacks::load(&CallbackConfig::default(), &AuthConfig::default(), db.clone(), &clock).await.unwrap();
    let server = c.secrets.default_secret().to_string();
    assert_eq!(&*c.secrets.secret_for("late").await, server, "no secret of its own yet");

    // Issued by another node: this one keeps its cached read for the ttl.
    db.issue_token("late", "late-hash", "late-secret", T0).await.unwrap();
    h.clock.advance(SECRET_TTL.as_millis() as i64 - 1);
    assert_eq!(&*c.secrets.secret_for("late").await, server, "cached within the ttl");
    h.clock.advance(1);
    assert_eq!(&*c.secrets.secret_for("late").await, "late-secret", "read again after the ttl");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_address_is_refused_once_and_never_retried() {
    let h = Harness::start(reconciler_config()).await;
    let t = h
        .timer_to(
            "metadata",
            TimerStatus::Enabled,
            MisfirePolicy::FireAll,
            "http://169.254.169.254/latest/meta-data/",
            retrying(),
        )
        .await;
    let keys = h.fires(&t, &[-10_000]).await;
    h.reconciler.run_once().await.unwrap();
    h.wait_for_status(&keys, FireStatus::Failed).await;
    let f = h.fire(keys[0]).await;
    assert_eq!(f.attempt, 1, "a refusal is final: {f:?}");
    assert!(
        f.output.starts_with("refused: callback target 169.254.169.254 is in the denied range 169.254.0.0/16"),
        "{}",
        f.output
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_resolving_to_a_denied_address_is_refused_after_resolution() {
    let deny = CallbackConfig { deny_cidrs: vec!["127.0.0.0/8".into(), "::1".into()], ..CallbackConfig::default() };
    let callbacks =
        Callbacks { policy: Arc::new(deny.target_policy().unwrap()), secrets: Arc::new(AppSecrets::fixed("s")) };
    let h = Harness::start_with(reconciler_config(), callbacks).await;
    let by_name = format!("http://localhost:{}/hook", h.receiver.addr.port());
    let by_ip = format!("http://{}/hook", h.receiver.addr);
    let a = h.timer_to("by-name", TimerStatus::Enabled, MisfirePolicy::FireAll, &by_name, retrying()).await;
    let b = h.timer_to("by-ip", TimerStatus::Enabled, MisfirePolicy::FireAll, &by_ip, retrying()).await;
    let keys = [h.fires(&a, &[-10_000]).await[0], h.fires(&b, &[-10_000]).await[0]];
    h.reconciler.run_once().await.unwrap();
    h.wait_for_status(&keys, FireStatus::Failed).await;
    h.wait_idle().await;
    let (fa, fb) = (h.fire(keys[0]).await, h.fire(keys[1]).await);
    assert!(fa.output.contains("host `localhost` resolves only to denied addresses"), "{}", fa.output);
    assert!(fb.output.contains("callback target 127.0.0.1 is in the denied range 127.0.0.0/8"), "{}", fb.output);
    assert_eq!((fa.attempt, fb.attempt), (1, 1));
    assert_eq!(h.receiver.total(), 0, "nothing reached the receiver");
}
