use super::*;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn an_otlp_endpoint_is_an_http_url_and_gets_its_traces_path() {
    let url = |endpoint: &str| TelemetryConfig { otlp_endpoint: endpoint.into() }.traces_url();
    assert_eq!(url(""), Ok(None));
    assert_eq!(url("http://127.0.0.1:4318"), Ok(Some("http://127.0.0.1:4318/v1/traces".into())));
    assert_eq!(url("https://otel.example.com/"), Ok(Some("https://otel.example.com/v1/traces".into())));
    assert_eq!(url("http://collector:4318/custom/path"), Ok(Some("http://collector:4318/custom/path".into())));
    for bad in ["127.0.0.1:4318", "grpc://x:4317", "http://", "http://:4318", "http://a b"] {
        let err = url(bad).unwrap_err();
        assert!(err.contains("telemetry.otlp_endpoint"), "{bad}: {err}");
    }
    let Err(Error::Config(list)) = Config::load(None, &env(&[("XTIMER_TELEMETRY__OTLP_ENDPOINT", "localhost:4318")]))
    else {
        panic!("refused")
    };
    assert!(list.iter().any(|p| p.contains("telemetry.otlp_endpoint")), "{list:?}");
}

#[test]
fn defaults_load_without_file_or_env() {
    let c = Config::load(None, &BTreeMap::new()).unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(c.server.listen, "127.0.0.1:8080");
}

#[test]
fn file_then_env_override_in_order() {
    let file = "[executor]\nconcurrency = 10\ntimeout_ms = 2000\n[server]\nlisten = \"0.0.0.0:9\"\n";
    let c = Config::load(Some(file), &env(&[("XTIMER_EXECUTOR__CONCURRENCY", "20"), ("OTHER", "x")])).unwrap();
    assert_eq!(c.executor.concurrency, 20);
    assert_eq!(c.executor.timeout_ms, 2000);
    assert_eq!(c.server.listen, "0.0.0.0:9");
}

#[test]
fn a_variable_that_names_no_setting_stops_the_start_with_the_nearest_name() {
    let Err(Error::Config(list)) = Config::load(None, &env(&[("XTIMER_REDIS_URL", "redis://10.0.0.5:6379")])) else {
        panic!("refused")
    };
    assert_eq!(
        list,
        ["XTIMER_REDIS_URL names no setting (a setting is XTIMER_<SECTION>__<FIELD>, two underscores): \
          did you mean XTIMER_REDIS__URL?"]
    );
    let Err(Error::Config(list)) = Config::load(None, &env(&[("XTIMER_WHATEVER", "1")])) else { panic!() };
    assert_eq!(list, ["XTIMER_WHATEVER names no setting (a setting is XTIMER_<SECTION>__<FIELD>, two underscores)"]);
    // The command line's own variables, the log level and tests' variables are not settings.
    let fine = env(&[
        ("XTIMER_DATABASE_URL", "sqlite://x.db"),
        ("XTIMER_LOG", "debug"),
        ("XTIMER_LOG_FORMAT", "json"),
        ("XTIMER_SERVER", "http://127.0.0.1:8080"),
        ("XTIMER_TOKEN", "secret"),
        ("XTIMER_CONFIG", "/etc/xtimer.toml"),
        ("XTIMER_TEST_REDIS_URL", "redis://127.0.0.1:1"),
    ]);
    assert_eq!(Config::load(None, &fine).unwrap(), Config::default());
}

#[test]
fn every_problem_is_reported() {
    let err = Config::load(
        Some("[shard]\nbuckets = 0\n"),
        &env(&[("XTIMER_EXECUTOR__CONCURRENCY", "many"), ("XTIMER_NOPE__X", "1"), ("XTIMER_SERVER__NOPE", "1")]),
    )
    .unwrap_err();
    let Error::Config(list) = err else { panic!() };
    let text = list.join("\n");
    assert!(text.contains("not a whole number"), "{text}");
    assert!(text.contains("unknown section `nope`"), "{text}");
    assert!(text.contains("unknown field `nope`"), "{text}");
    assert!(text.contains("shard.buckets"), "{text}");
}

#[test]
fn a_file_with_several_mistakes_reports_each_with_its_key_path() {
    let file = "[server]\nlisn = \"0.0.0.0:80\"\nlisten = \"0.0.0.0:81\"\n\
                [executor]\nconcurrency = \"lots\"\ntimeout = 5\n\
                [reconcilr]\nperiod_ms = 1\n\
                [auth.apps.billing]\ntokn = \"x\"\n[auth.apps.ops]\ntoken = \"y\"\n\
                [shard]\nbuckets = 0\n";
    let Err(Error::Config(list)) = Config::load(Some(file), &BTreeMap::new()) else { panic!("refused") };
    assert_eq!(
        list,
        [
            "auth.apps.billing.tokn: unknown field `tokn`, expected `token` or `secret`",
            "executor.concurrency: invalid type: string \"lots\", expected a whole number",
            "executor.timeout: unknown field `timeout`, expected one of `concurrency`, `timeout_ms`, `lease_ms`, \
             `batch_size`, `max_output_bytes`, `claim_linger_ms`, `record_linger_ms`, `per_host_concurrency`, \
             `per_app_concurrency`, `breaker_failures`, `breaker_open_ms`",
            "reconcilr: unknown field `reconcilr`, expected one of `server`, `database`, `redis`, `shard`, \
             `migrator`, `scheduler`, `trigger`, `executor`, `reconciler`, `retention`, `asyncflow`, `auth`, \
             `callback`, `limits`, `telemetry`",
            "server.lisn: unknown field `lisn`, expected one of `listen`, `max_body_bytes`, \
             `max_batch_body_bytes`, `shutdown_grace_ms`, `header_read_timeout_ms`, `body_read_timeout_ms`, `idle_timeout_ms`, \
             `max_connections`",
            // The settings that did parse are checked too.
            "shard.buckets must be 1 to 4096",
        ]
    );
}

#[test]
fn type_errors_and_nonsense_values_are_reported_together_with_env_problems() {
    let file = "[scheduler]\ntick_ms = 5\nlease_ms = true\n[executor]\nbatch_size = 0\n";
    let env = env(&[("XTIMER_SHARD__BUCKETS", "x"), ("XTIMER_AUTH__ENABLED", "maybe")]);
    let Err(Error::Config(list)) = Config::load(Some(file), &env) else { panic!("refused") };
    assert_eq!(
        list,
        [
            "XTIMER_AUTH__ENABLED: `maybe` is not true or false",
            "XTIMER_SHARD__BUCKETS: `x` is not a whole number",
            "scheduler.lease_ms: invalid type: boolean `true`, expected a whole number",
            "scheduler.tick_ms must be at least 10",
            "executor.batch_size must be 1 to 5000",
        ]
    );
}

#[test]
fn the_old_misfire_window_name_still_reads() {
    let c = Config::load(Some("[reconciler]\nmisfire_window_ms = 5000\n"), &BTreeMap::new()).unwrap();
    assert_eq!(c.reconciler.misfire_threshold_ms, 5_000);
    let c = Config::load(None, &env(&[("XTIMER_RECONCILER__MISFIRE_WINDOW_MS", "7000")])).unwrap();
    assert_eq!(c.reconciler.misfire_threshold_ms, 7_000);
    let both = "[reconciler]\nmisfire_window_ms = 5000\nmisfire_threshold_ms = 6000\n";
    let err = Config::load(Some(both), &BTreeMap::new()).unwrap_err().to_string();
    assert!(err.contains("reconciler.misfire_window_ms: an old name of reconciler.misfire_threshold_ms"), "{err}");
}

#[test]
fn a_toml_syntax_error_names_its_line() {
    let err = Config::load(Some("[server]\nlisten = \n"), &BTreeMap::new()).unwrap_err().to_string();
    assert!(err.starts_with("invalid configuration: config file: TOML parse error at line 2"), "{err}");
}

#[test]
fn unknown_file_field_is_refused() {
    let err = Config::load(Some("[server]\nlisn = \"x\"\n"), &BTreeMap::new()).unwrap_err();
    assert!(err.to_string().contains("lisn"), "{err}");
}

#[test]
fn security_sections_load_from_file_and_env() {
    let file = "[auth]\nenabled = true\n[auth.apps.billing]\ntoken = \"tok\"\n[callback]\nallow_cidrs = [\"169.254.1.0/24\"]\n";
    let c = Config::load(
        Some(file),
        &env(&[
            ("XTIMER_CALLBACK__DENY_CIDRS", "127.0.0.0/8, ::1"),
            ("XTIMER_LIMITS__REQUESTS_PER_SECOND", "7"),
            ("XTIMER_AUTH__ADMIN_TOKEN", "adm"),
        ]),
    )
    .unwrap();
    assert!(c.auth.enabled);
    assert_eq!(c.auth.admin_token.expose(), "adm");
    assert_eq!(c.auth.apps["billing"].token.expose(), "tok");
    assert_eq!(c.callback.allow_cidrs, ["169.254.1.0/24"]);
    assert_eq!(c.callback.deny_cidrs, ["127.0.0.0/8", "::1"]);
    assert_eq!(c.limits.requests_per_second, 7);
    assert!(!format!("{c:?}").contains("adm\""), "secrets stay out of Debug");
    let defaults = Config::default();
    assert!(!defaults.auth.enabled, "auth is off by default");
    assert_eq!(defaults.limits.requests_per_second, 5_000);
}

#[test]
fn a_bad_cidr_is_reported() {
    let err = Config::load(None, &env(&[("XTIMER_CALLBACK__ALLOW_CIDRS", "10.0.0.0/99")])).unwrap_err();
    assert!(err.to_string().contains("callback.allow_cidrs: `10.0.0.0/99`"), "{err}");
}

#[test]
fn tokens_file_adds_credentials_and_names_a_bad_line() {
    let dir = std::env::temp_dir().join(format!("xtimer-tokens-{}", std::process::id()));
    std::fs::write(&dir, "# app token secret\nbilling t1 s1\n\nops t2 # no secret\n").unwrap();
    let auth = AuthConfig { tokens_file: dir.display().to_string(), ..AuthConfig::default() };
    let creds = auth.credentials().unwrap();
    assert_eq!(creds["billing"].token.expose(), "t1");
    assert_eq!(creds["billing"].secret.expose(), "s1");
    assert_eq!(creds["ops"].token.expose(), "t2");
    assert!(creds["ops"].secret.is_empty());
    std::fs::write(&dir, "billing\n").unwrap();
    let err = auth.credentials().unwrap_err();
    assert!(err.to_string().contains("line 1"), "{err}");
    std::fs::remove_file(&dir).unwrap();
}
