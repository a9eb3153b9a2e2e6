//! Malformed input on the timer API: bad JSON, wrong types, bad query
//! strings, huge bodies, deep nesting, invalid crons and time zones, and
//! callback URLs the target policy refuses.

use super::*;

impl Gen<'_> {
    /// Bodies that are not JSON, or not the JSON asked for.
    pub(super) fn bad_json(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let valid = self.valid_timer(app).to_string().into_bytes();
        let path = format!("{}/createTimer", self.prefix());
        let body: Vec<u8> = match self.below(13) {
            12 => {
                // delTimer's fields as an array: serde would read them in order.
                let path = format!("{}/delTimer", self.prefix());
                let body = json!([self.pick(&app.timers), app.name]).to_string();
                let ct = self.pick(&[Some("application/json"), None]);
                return Hostile::timer(DELETE, path).bearer(app.token).raw(ct, body);
            }
            0 => valid[..self.below(valid.len())].to_vec(),
            1 => [valid.clone(), self.pick(&["x", "}", "{}", ",", "\0", "]", "null", "\u{7f}", "{\"a\":1}"]).into()]
                .concat(),
            2 => {
                // Invalid UTF-8 inside the name string.
                let at = find(&valid, b"adv-") + 1;
                let bad: &[u8] =
                    self.pick(&[&b"\xff"[..], b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf"]);
                [&valid[..at], bad, &valid[at..]].concat()
            }
            3 => self.pick(&["", " ", "\n\t", "\r\n  "]).into(),
            4 => {
                let top = self.pick(&["[]", "null", "true", "42", "\"x\"", "-0", "1e999"]);
                if self.chance(30) {
                    format!("[{}]", String::from_utf8_lossy(&valid)).into_bytes()
                } else {
                    top.into()
                }
            }
            5 => [&b"\xef\xbb\xbf"[..], &valid].concat(),
            6 => {
                let text = String::from_utf8_lossy(&valid).into_owned();
                match self.below(4) {
                    0 => text.replacen('"', "'", 4),
                    1 => format!("{},}}", &text[..text.len() - 1]),
                    2 => text.replacen("{\"app\"", "{/*c*/\"app\"", 1),
                    _ => text.replacen("\"app\":", "app:", 1),
                }
                .into_bytes()
            }
            7 => {
                let number =
                    self.pick(&["NaN", "Infinity", "-Infinity", "1e400", "0x10", "01", "+1", ".5", "1.", "1_0"]);
                String::from_utf8_lossy(&valid)
                    .replacen("\"status\":1", &format!("\"status\":{number}"), 1)
                    .into_bytes()
            }
            8 => {
                let dup = self.pick(&[
                    "\"app\":\"alpha\",",
                    "\"name\":\"other\",",
                    "\"status\":1,",
                    "\"cron\":\"* * * * *\",",
                ]);
                String::from_utf8_lossy(&valid).replacen('{', &format!("{{{dup}"), 1).into_bytes()
            }
            9 => {
                let bad = self.pick(&["\\ud800", "\\udfff", "\\u00", "\\x41", "\\", "\u{1}", "\n", "\\uZZZZ"]);
                String::from_utf8_lossy(&valid).replacen("adv-", &format!("adv{bad}-"), 1).into_bytes()
            }
            10 => self
                .pick(&[
                    "{\"app\":\"alpha}",
                    "{]",
                    "{\"a\" 1}",
                    "{\"app\"::\"alpha\"}",
                    "{{}}",
                    "{\"notifyHTTPParam\":{\"url\":\"x\"]}",
                    "{,}",
                    "{\"app\":\"alpha\",}",
                ])
                .into(),
            _ => {
                // A valid body, but not declared JSON.
                let ct = self.pick(&[
                    None,
                    Some("text/plain"),
                    Some("application/x-www-form-urlencoded"),
                    Some("multipart/form-data; boundary=x"),
                    Some("application/+json"),
                    Some("application/jsonp"),
                    Some("text/json"),
                    Some("json"),
                    Some("application/xml"),
                    Some(""),
                ]);
                return Hostile::timer(POST, path).bearer(app.token).raw(ct, valid);
            }
        };
        match self.below(6) {
            // delTimer reads a JSON body when there is no query string.
            0 => {
                let path = format!("{}/delTimer", self.prefix());
                let ct = self.pick(&[Some("application/json"), None]);
                Hostile::timer(DELETE, path).bearer(app.token).raw(ct, body)
            }
            1 => {
                let path = format!("{}/admin/issueToken", self.prefix());
                Hostile::timer(POST, path).bearer(ADMIN).json(body)
            }
            _ => Hostile::timer(POST, path).bearer(app.token).json(body),
        }
    }

    /// Each field of createTimer, and each query parameter, with a value of the wrong type or range.
    pub(super) fn wrong_types(&mut self) -> Hostile {
        let (app, other) = self.apps();
        if self.chance(30) {
            return self.bad_query(app);
        }
        let (field, value) = self.mutation("create_timer", |m| &m.create_timer);
        let mut body = self.valid_timer(app);
        match field {
            "runAt" => {
                body.as_object_mut().unwrap().remove("cron");
            }
            "notifyAsyncflowParam" => {
                body.as_object_mut().unwrap().remove("notifyHTTPParam");
            }
            _ => {}
        }
        let field = field.strip_suffix("+http").unwrap_or(field);
        set_path(&mut body, field, value);
        let text = body.to_string().replace("$OWN_TYPE", app.task_type).replace("$OTHER_TYPE", other.task_type);
        let path = format!("{}/createTimer", self.prefix());
        Hostile::timer(POST, path).bearer(app.token).json(text)
    }

    /// Query strings of the GET routes with wrong types, ranges or unknown keys.
    pub(super) fn bad_query(&mut self, app: &App) -> Hostile {
        let id = self.pick(&app.timers);
        let a = app.name;
        let bad_id = self.pick(&[
            "abc",
            "1.5",
            "",
            "9223372036854775808",
            "-9223372036854775809",
            "0x10",
            "1e3",
            "%00",
            "１",
            "1%20",
            "NaN",
            "[1]",
        ]);
        let query = match self.below(4) {
            0 => format!("id={bad_id}&app={a}"),
            1 => {
                let q = self.pick(&[
                    "pageSize=0",
                    "pageSize=501",
                    "pageSize=-1",
                    "pageSize=abc",
                    "pageSize=1e3",
                    "pageIndex=0",
                    "pageIndex=-1",
                    "pageIndex=abc",
                    "pageIndex=9223372036854775807",
                    "pageIndex=9223372036854775808",
                    "pageSize=18446744073709551616",
                    "limit=10",
                    "page=2",
                ]);
                let path = format!("{}/getAppTimers?app={a}&{q}", self.prefix());
                return Hostile::timer(GET, path).bearer(app.token);
            }
            2 => {
                let q = self.pick(&[
                    "status=6",
                    "status=-1",
                    "status=abc",
                    "status=9223372036854775808",
                    "pageSize=0",
                    "pageIndex=0",
                    "pageSize=1000",
                    "state=1",
                ]);
                let path = format!("{}/getTimerTasks?id={id}&app={a}&{q}", self.prefix());
                return Hostile::timer(GET, path).bearer(app.token);
            }
            _ => {
                let q = self.pick(&[
                    "id={id}&app={a}&extra=1",
                    "id={id}",
                    "app={a}",
                    "id={id}&app=",
                    "ID={id}&app={a}",
                    "id={id}&app={a}&app=",
                    "id={id}&APP={a}",
                ]);
                q.replace("{id}", &id.to_string()).replace("{a}", a)
            }
        };
        let (method, route) = self.pick(&TIMER_ROUTES);
        let path = format!("{}/{route}?{query}", self.prefix());
        Hostile::timer(method, path).bearer(app.token)
    }

    /// Bodies over `server.max_body_bytes` (413), and fields over their own limits.
    pub(super) fn huge_body(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let over = self.max_body + 1 + self.below(3 * self.max_body);
        match self.below(8) {
            0 => self.create_with(app, "name", json!("n".repeat(over))),
            1 => self.create_with(app, "notifyHTTPParam.body", json!("b".repeat(over))),
            2 => {
                let path = format!("{}/delTimer", self.prefix());
                let body = json!({"id": app.timers[0], "app": app.name, "pad": "p".repeat(over)}).to_string();
                Hostile::timer(DELETE, path).bearer(app.token).json(body)
            }
            3 => {
                let path = format!("{}/admin/issueToken", self.prefix());
                Hostile::timer(POST, path).bearer(ADMIN).json(json!({"app": "a".repeat(over)}).to_string())
            }
            4 => {
                let path = self.pick(&["/v1/create_task", "/v1/set_task", "/v1/register_task", "/v1/hold_tasks"]);
                let body = json!({"task_data": {"task_type": app.task_type, "context": "c".repeat(over)}}).to_string();
                Hostile::v1(POST, path).bearer(app.token).json(body)
            }
            // Under the body limit, over a field's limit.
            _ => {
                let (field, value) = match self.below(8) {
                    0 => ("name", json!("n".repeat(257 + self.below(5_000)))),
                    1 => (
                        "notifyHTTPParam.url",
                        json!(format!("http://127.0.0.1:9/{}", "u".repeat(2_048 + self.below(5_000)))),
                    ),
                    2 => ("cron", json!(format!("0 0 3 * * ?{}", " ".repeat(250 + self.below(1_000))))),
                    3 => (
                        "notifyHTTPParam.header",
                        Value::Object((0..33 + self.below(100)).map(|i| (format!("X-H{i}"), json!("v"))).collect()),
                    ),
                    4 => ("notifyHTTPParam.header", json!({"X-Big": "v".repeat(4_097 + self.below(10_000))})),
                    5 => (
                        "notifyHTTPParam.header",
                        json!({"X-".to_string() + &"n".repeat(127 + self.below(1_000)): "v"}),
                    ),
                    6 => (
                        "notifyHTTPParam.header",
                        Value::Object((0..5).map(|i| (format!("X-H{i}"), json!("v".repeat(4_000)))).collect()),
                    ),
                    _ => (
                        "cron",
                        json!(format!(
                            "{} * * * * ?",
                            (0..60).map(|s| s.to_string()).collect::<Vec<_>>().join(",").repeat(3)
                        )),
                    ),
                };
                self.create_with(app, field, value)
            }
        }
    }

    /// Up to 10,000 levels of nested arrays or objects in a field or a body.
    pub(super) fn deep_nesting(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let depth = self.pick(&[129, 200, 1_000, 5_000, 10_000]);
        let deep = self.deep(depth);
        let wrap = |key: &str| format!("{{\"{key}\":{deep}}}");
        match self.below(9) {
            0..=2 => {
                let field = self.pick(&["name", "runAt", "retry", "notifyHTTPParam", "header", "timezone", "cron"]);
                let mut body = self.valid_timer(app);
                if field == "runAt" {
                    body.as_object_mut().unwrap().remove("cron");
                }
                let text = body.to_string();
                let text = match field {
                    "header" => text.replacen("{\"X-Adv\":\"1\"}", &deep, 1),
                    f => {
                        let key = format!("\"{f}\":");
                        match text.find(&key) {
                            Some(_) => replace_value(&text, &key, &deep),
                            None => text.replacen('{', &format!("{{{key}{deep},"), 1),
                        }
                    }
                };
                let path = format!("{}/createTimer", self.prefix());
                Hostile::timer(POST, path).bearer(app.token).json(text)
            }
            3 => {
                let path = format!("{}/delTimer", self.prefix());
                Hostile::timer(DELETE, path).bearer(app.token).json(wrap("id"))
            }
            4 => {
                let path = format!("{}/admin/issueToken", self.prefix());
                Hostile::timer(POST, path).bearer(ADMIN).json(wrap("app"))
            }
            5 => {
                let body = format!("{{\"task_data\":{{\"task_type\":\"{}\",\"context\":{deep}}}}}", app.task_type);
                Hostile::v1(POST, "/v1/create_task").bearer(app.token).json(body)
            }
            6 => Hostile::v1(POST, "/v1/set_task").bearer(app.token).json(format!("{{\"task_data\":{deep}}}")),
            7 => {
                let body = format!("{{\"task_type\":\"{}\",\"limit\":{deep}}}", app.task_type);
                Hostile::v1(POST, "/v1/hold_tasks").bearer(app.token).json(body)
            }
            _ => {
                let body = format!("{{\"task_config_data\":{{\"task_type\":\"adv_new\",\"schedule_limit\":{deep}}}}}");
                Hostile::v1(POST, "/v1/register_task").bearer(app.token).json(body)
            }
        }
    }

    /// Crons that are malformed, out of range, or never fire.
    pub(super) fn bad_cron(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let cron = self.cycle("cron", BAD_CRONS).to_string();
        let tz = self.pick(&["UTC", "Asia/Shanghai", "America/New_York", "Pacific/Kiritimati"]);
        let mut body = self.valid_timer(app);
        body["cron"] = json!(cron);
        body["timezone"] = json!(tz);
        self.create(app, &body)
    }

    /// Time zones that do not exist, for cron and one-shot timers.
    pub(super) fn bad_timezone(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let tz = match self.below(8) {
            0 => "Asia/".to_string() + &"x".repeat(10_000),
            _ => self.cycle("timezone", BAD_TIMEZONES).to_string(),
        };
        let mut body = self.valid_timer(app);
        body["timezone"] = json!(tz);
        if self.chance(25) {
            body.as_object_mut().unwrap().remove("cron");
            body["runAt"] = json!("2099-06-01T00:00:00Z");
        }
        self.create(app, &body)
    }

    /// Callback URLs pointing at metadata, link-local and other denied
    /// addresses (in every spelling), and URLs that are not http(s).
    pub(super) fn ssrf_url(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let url = match self.below(10) {
            0 => format!("http://127.0.0.1:9/{}", "a".repeat(2_049 + self.below(3_000))),
            _ => self.cycle("ssrf", SSRF_URLS).to_string(),
        };
        let method = self.pick(&["POST", "GET", "PUT"]);
        let mut body = self.valid_timer(app);
        body["notifyHTTPParam"]["url"] = json!(url);
        body["notifyHTTPParam"]["method"] = json!(method);
        if self.chance(30) {
            body["status"] = json!(2);
        }
        self.create(app, &body)
    }
}

/// `(field, value)` pairs, each of which makes a valid createTimer body
/// invalid. A `runAt` replaces `cron`; a `notifyAsyncflowParam` replaces
/// `notifyHTTPParam`, but with `+http` it comes beside it. `$OWN_TYPE` and
/// `$OTHER_TYPE` stand for the caller's and the other app's task types.
pub(super) fn create_timer_mutations() -> Vec<(&'static str, Value)> {
    // Each field, and the values (as JSON) it must refuse.
    let table = [
        ("app", r#"[5, [], {}, null, true, ["alpha"]]"#),
        ("name", r#"["", 7, [], {}, null, false]"#),
        ("cron", r#"[5, [], {}, true, ["0 0 3 * * ?"]]"#),
        ("timezone", r#"[8, [], {}, true, ["UTC"]]"#),
        (
            "status",
            r#"["2", "1", 0, 3, -1, 2.0, 1.5, true, [],
               9223372036854775807, -9223372036854775808, 18446744073709551615]"#,
        ),
        (
            "notifyHTTPParam",
            r#"[null, "http://127.0.0.1:9/", [], ["http://127.0.0.1:9/adv", "POST"], 5, true, {},
               {"method": "POST"}]"#,
        ),
        ("notifyHTTPParam.url", r#"[5, [], {}, null, true, ""]"#),
        (
            "notifyHTTPParam.method",
            r#"[5, [], {}, true, "CONNECT", "TRACE", "OPTIONS", "HEAD", "GE T", "", "POST\r\nX: y", "ПОСТ"]"#,
        ),
        (
            "notifyHTTPParam.header",
            r#"["X-A: 1", [], [["X-A", "1"]], 5, {"X-A": 5}, {"X-A": null}, {"X-A": []}, {"Bad Header": "v"},
               {"X-A": "line\nbreak"}, {"X-A": "a\rb"}, {"Content-Length": "5"}, {"Transfer-Encoding": "chunked"},
               {"x-a": "1", "X-A": "2"}, {"": "v"}, {"X-A\u0000": "v"}, {"Connection": "close"}, {"Host:": "x"},
               {"X-Ü": "v"}]"#,
        ),
        ("notifyHTTPParam.body", r#"[5, {}, [], true, {"a": 1}]"#),
        ("notifyHTTPParam.timeout", "[5]"),
        ("retry", r#"["3", 5, [], [3, 1000], true, {"attempts": 3}]"#),
        ("retry.maxAttempts", r#"[0, 21, -1, "3", 3.5, 18446744073709551615, -9223372036854775808, [3], true]"#),
        (
            "retry.backoffMs",
            r#"[-1, 600001, "1000", 1e3, -9223372036854775808, 9223372036854775807, 18446744073709551615, {}]"#,
        ),
        ("misfire", r#"[5, "", "never", "fire_twice", "skip ", [], true, "FIRE-ALL"]"#),
        // Every way of not being a future time.
        (
            "runAt",
            r#"[true, [], {}, 1.5, 1.9e12, 18446744073709551615, 9223372036854775807, -9223372036854775808,
               -1, 0, 1700000000, "2020-01-01T00:00:00Z", "2026-13-01T00:00:00Z", "tomorrow",
               "2099-01-01T00:00:00", "2099-01-01", "10000-01-01T00:00:00Z", "+275760-09-13T00:00:00Z", "",
               "2099-02-30T00:00:00Z", "2099-01-01T25:00:00Z", 253402300800000]"#,
        ),
        // The task each fire creates: another app's type, types that do not
        // exist or cannot, fields over their limits, and the wrong shapes.
        (
            "notifyAsyncflowParam",
            r#"[{"taskType": "$OTHER_TYPE"}, {"taskType": "$OTHER_TYPE", "taskStage": "s", "context": {"a": 1}},
               {"taskType": "adv_nosuch"}, {"taskType": "ADV_ALPHA"},
               {"taskType": "x'; DROP TABLE t_schedule_cfg;--"}, {"taskType": ""},
               {"taskType": "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"}, {"taskType": 5},
               {"taskType": ["$OWN_TYPE"]}, {"taskType": "$OWN_TYPE", "taskStage": 5},
               {"taskType": "$OWN_TYPE", "extra": 1}, {"stage": "s"}, ["$OWN_TYPE"], "$OWN_TYPE", null]"#,
        ),
        ("notifyAsyncflowParam+http", r#"[{"taskType": "$OWN_TYPE"}]"#),
        // Fields that do not exist.
        ("id", "[1]"),
        ("Status", "[1]"),
        ("notifyHttpParam", r#"[{"url": "http://127.0.0.1:9/adv"}]"#),
        ("run_at", r#"["2099-06-01T00:00:00Z"]"#),
        ("__proto__", "[{}]"),
        ("createTime", "[1]"),
        ("owner", r#"["beta"]"#),
        ("app ", r#"["alpha"]"#),
    ];
    let mut out = pairs(&table);
    // Over a length limit.
    out.push(("name", json!("x".repeat(257))));
    out.push(("notifyAsyncflowParam", json!({"taskType": "$OWN_TYPE", "taskStage": "s".repeat(257)})));
    out
}

/// Crons that are malformed, out of range, or never fire.
pub(super) const BAD_CRONS: &[&str] = &[
    "",
    " ",
    "*",
    "* *",
    "* * *",
    "* * * *",
    "* * * * * * * *",
    "0 0 0 1 1 ? 2030 extra",
    "60 * * * *",
    "* 24 * * *",
    "* * 32 * *",
    "* * 0 * *",
    "* * * 13 *",
    "* * * 0 *",
    "* * * * 8",
    "61 * * * * *",
    "* 60 * * * *",
    "*/0 * * * *",
    "0/0 * * * * *",
    "*/-1 * * * *",
    "1-60/0 * * * * ?",
    "L * * * *",
    "W * * * *",
    "# * * * *",
    "* L * * *",
    "* * * * * 8#1",
    "* * * * * 1#0",
    "0 0 0 32W * ?",
    "99999999999999999999 * * * *",
    "4294967296 * * * * *",
    "-1 * * * *",
    "٣ * * * *",
    "* * * * MON-FRII",
    "* * * JANUARY *",
    "* * * * * ? 1969",
    "0 0 0 1 1 ? 1970",
    "0 0 0 1 1 ? 2020",
    "0 0 0 1 1 ? 2020-2024",
    "0 0 0 30 2 ?",
    "0 0 0 31 4 ? *",
    "0 0 0 31 2,4,6,9,11 ?",
    "0 0 0 30 2 ? 2030-2040",
    "* * * * * ? 10000",
    "* * * * * ? 99999",
    "@every 5s",
    "@reboot",
    "@yearly 5",
    "@",
    "@@daily",
    "@ daily",
    "@secondly",
    "*\0 * * * *",
    "* * * * *\n* * * * *",
    "0 0 3 * * ? ; DROP TABLE t_timer",
    "${jndi:ldap://127.0.0.1/a}",
    "1,2,,3 * * * *",
    ",* * * * *",
    "*/ * * * *",
    "1- * * * *",
    "? ? ? ? ? ?",
    "0 0 0 29 2 ? 2100",
    "0 0 0 29 2 ? 2097-2099",
    "0 0 0 L 2 ? 1900-2000",
    "0 0 12 ? * 5#6",
    "0 0 12 ? * 8L",
    "0 0 12 LW-1 * ?",
    "0 0 12 1W-3 * ?",
    "0 0 12 ? * MON#2#3",
    "0 0 12 ? * SUN-",
    "0 0 12 ? * L-3",
    "* * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * *",
    "1 2 3 4 5 6 7 8",
];

/// Time zones that do not exist.
pub(super) const BAD_TIMEZONES: &[&str] = &[
    "Mars/Olympus_Mons",
    "",
    " ",
    "UTC ",
    " UTC",
    "utc",
    "GMT+8",
    "UTC+25",
    "+08:00",
    "Etc/GMT+13",
    "Etc/GMT-15",
    "Asia/Shanghai\0",
    "../../../etc/passwd",
    "/etc/localtime",
    "America/New York",
    "EST5EDT,M3.2.0,M11.1.0",
    "asia/shanghai",
    "ASIA/SHANGHAI",
    "Ásia/Shanghai",
    "Asia/Shanghai;DROP TABLE t_timer",
    "Asia\\Shanghai",
    "Asia/Shanghai/Extra",
    "Local",
    "localtime",
    "Z",
    "Europe/Kyiv\n",
    "${TZ}",
    "亚洲/上海",
];

/// Callback URLs that must be refused: denied addresses in every
/// spelling, schemes that are not http(s), and URLs that do not parse.
pub(super) const SSRF_URLS: &[&str] = &[
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "http://169.254.169.254:80/",
    "https://169.254.169.254/",
    "HTTP://169.254.169.254/",
    "http://169.254.170.2/v2/credentials",
    "http://169.254.0.1/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[fe80::1]/",
    "http://[fe80::a9fe:a9fe]:8080/",
    "http://100.100.100.200/latest/meta-data/",
    "http://0.0.0.0/",
    "http://0.0.0.0:9/",
    "http://0/",
    "http://[::]/",
    "http://[::]:9/",
    "http://255.255.255.255/",
    "http://224.0.0.1/",
    "http://239.255.255.250:1900/",
    "http://[ff02::1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[64:ff9b::169.254.169.254]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[::169.254.169.254]/",
    "http://2852039166/",
    "http://0xa9fea9fe/",
    "http://0251.0376.0251.0376/",
    "http://169.254.43518/",
    "http://user:pass@169.254.169.254/",
    "http://127.0.0.1@169.254.169.254/",
    "http://127.0.0.1:80@169.254.169.254/",
    "file:///etc/passwd",
    "gopher://127.0.0.1:6379/_INFO",
    "ftp://127.0.0.1/",
    "dict://127.0.0.1:11211/stats",
    "ldap://127.0.0.1/",
    "javascript:alert(1)",
    "data:text/plain,hi",
    "//169.254.169.254/",
    "169.254.169.254/latest",
    "http:/169.254.169.254/",
    "http://",
    "http://:80/",
    "http:// 169.254.169.254/",
    "http://169.254.169.254\\@127.0.0.1/",
    "http://ⓔⓧⓐⓜⓟⓛⓔ.com/",
    "http://169。254。169。254/",
    "http://[fe80::1%25eth0]/",
    "http://[169.254.169.254]/",
];
