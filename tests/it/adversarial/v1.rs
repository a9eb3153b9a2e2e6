//! The task API, `/v1`: bad JSON, wrong types, broken task ids, missing
//! tables, bad hold and list parameters, unknown tasks, bad registrations
//! and other apps' task types.

use super::*;

impl Gen<'_> {
    /// Bodies of the JSON calls that are not JSON, or not the JSON asked for.
    pub(super) fn v1_bad_json(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let (path, valid) = match self.below(4) {
            0 => ("/v1/create_task", self.valid_task(app)),
            1 => ("/v1/set_task", json!({"task_data": {"task_id": self.pick(&app.tasks), "status": 3}})),
            2 => ("/v1/register_task", json!({"task_config_data": Self::valid_cfg(app.task_type)})),
            _ => ("/v1/hold_tasks", json!({"task_type": app.task_type, "limit": 5})),
        };
        // Go refuses a JSON array where an object is expected; serde would read it field by field.
        let as_array = match valid.get("task_data") {
            Some(data) => json!([data]),
            None => json!([valid]),
        };
        let valid = valid.to_string().into_bytes();
        let body: Vec<u8> = match self.below(10) {
            9 => as_array.to_string().into(),
            0 => valid[..self.below(valid.len())].to_vec(),
            1 => [valid.clone(), self.pick(&["x", "}", "{}", ",", "\0", "]", "null", "{\"a\":1}"]).into()].concat(),
            2 => {
                let at = self.below(valid.len() - 1) + 1;
                let bad: &[u8] = self.pick(&[&b"\xff"[..], b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf"]);
                // Inside a string: after the first quote at or past `at`.
                let at = valid[at..].iter().position(|b| *b == b'"').map_or(1, |p| at + p + 1);
                [&valid[..at], bad, &valid[at..]].concat()
            }
            3 if path != "/v1/hold_tasks" => self.pick(&["", " ", "\n"]).into(),
            4 => self.pick(&["null", "true", "42", "\"x\"", "1e999", "[]", "[1]", "[\"x\", 1]"]).into(),
            5 => [&b"\xef\xbb\xbf"[..], &valid].concat(),
            6 => {
                let text = String::from_utf8_lossy(&valid).into_owned();
                match self.below(3) {
                    0 => text.replacen('"', "'", 2),
                    1 => format!("{},}}", &text[..text.len() - 1]),
                    _ => format!("/*c*/{text}"),
                }
                .into_bytes()
            }
            7 => {
                let bad = self.pick(&["\\ud800", "\\u00", "\\x41", "\u{1}", "\n"]);
                let text = String::from_utf8_lossy(&valid).into_owned();
                let at = text.find(":\"").map_or(1, |p| p + 2);
                format!("{}{bad}{}", &text[..at], &text[at..]).into_bytes()
            }
            _ => self
                .pick(&[
                    "{\"task_data\":{]}",
                    "{\"task_data\"}",
                    "{\"task_data\":}",
                    "{,}",
                    "{\"task_type\"::1}",
                    "{{}}",
                ])
                .into(),
        };
        let ct = self.pick(&[Some("application/json"), None, Some("text/plain")]);
        Hostile::v1(POST, path).bearer(app.token).raw(ct, body)
    }

    /// Fields of create_task, set_task and register_task with values of the wrong type or range.
    pub(super) fn v1_wrong_types(&mut self) -> Hostile {
        let (app, _) = self.apps();
        match self.below(3) {
            0 => {
                let mut body = self.valid_task(app);
                let (field, value) = self.mutation("create_task", |m| &m.create_task);
                body["task_data"][field] = value;
                if self.chance(10) {
                    // Not an object; the array one is a valid task, field by field.
                    let fields = json!(["u-adv", "", app.task_type, "", 1, 0, 0, 0, 0, "", "{}"]);
                    body["task_data"] =
                        self.pick(&[json!("x"), json!(5), json!(null), json!(true), json!([[]]), fields]);
                }
                Hostile::v1(POST, "/v1/create_task").bearer(app.token).json(body.to_string())
            }
            1 => {
                let task = self.pick(&app.tasks);
                let mut body = json!({"task_data": {"task_id": task, "status": 1, "task_stage": "adv"}});
                let (field, value) = self.mutation("set_task", |m| &m.set_task);
                body["task_data"][field] = value;
                Hostile::v1(POST, "/v1/set_task").bearer(app.token).json(body.to_string())
            }
            _ => {
                let mut cfg = Self::valid_cfg(&format!("adv_new_{}", self.hex(6)));
                let (field, value) = self.mutation("register_task", |m| &m.register_task);
                cfg[field] = value;
                let body = if self.chance(50) { json!({ "task_config_data": cfg }) } else { cfg };
                Hostile::v1(POST, "/v1/register_task").bearer(app.token).json(body.to_string())
            }
        }
    }

    /// get_task and set_task with task ids that cannot name a task.
    pub(super) fn v1_broken_task_id(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let real = self.pick(&app.tasks);
        let (uuid, _) = real.split_once('_').unwrap();
        let kind = app.task_type.replace('_', "-");
        let id = match self.below(6) {
            // No underscore, or too few parts.
            0 => self.pick(&[
                "abc".to_string(),
                uuid.to_string(),
                "__".into(),
                "_".into(),
                format!("{uuid}_{kind}"),
                format!("{uuid}-{kind}-1"),
                "a_b".into(),
            ]),
            // A uuid part that is not hex.
            1 => {
                let bad = self.pick(&["zzzz", "", "g0", "0x1", "../..", "' OR 1=1 --", "ü", "1 2"]);
                let long = "a".repeat(65);
                let bad = if self.chance(20) { long.as_str() } else { bad };
                format!("{bad}_{kind}_1")
            }
            // A position that is not a whole number from 1.
            2 => {
                let pos = self.pick(&[
                    "-1",
                    "0",
                    "01",
                    "+1",
                    "1.0",
                    "x",
                    "",
                    "99999999999",
                    "4294967296",
                    "18446744073709551616",
                    " 1",
                    "1 ",
                    "1e3",
                    "0x1",
                    "١",
                    "1;DROP TABLE t",
                ]);
                format!("{uuid}_{kind}_{pos}")
            }
            // A type part that cannot be a table name.
            3 => {
                let kind = self.pick(&INJECTIONS).replace('_', "-");
                let kind = if self.chance(20) { "k".repeat(41) } else { kind };
                format!("{uuid}_{kind}_1")
            }
            // 10 KB ids.
            4 => self.pick(&[
                format!("{}_{kind}_1", "a".repeat(10_000)),
                format!("{uuid}_{}_1", "k".repeat(10_000)),
                format!("{uuid}_{kind}_{}", "1".repeat(10_000)),
                "x".repeat(10_000),
            ]),
            _ => self.pick(&[
                format!("{uuid}_{kind}_1\n"),
                format!("{uuid}_{kind}_1\0"),
                format!("\u{202e}{real}"),
                format!("{real}_1"),
                format!("{uuid}_{}_1", app.task_type),
            ]),
        };
        if self.chance(50) {
            let name = self.pick(&["task_id", "taskId"]);
            // With a repeated key, the last one counts: a real id first does not help.
            let first = if self.chance(20) { format!("{name}={}&", enc(&real)) } else { String::new() };
            return Hostile::v1(GET, format!("/v1/get_task?{first}{name}={}", enc(&id))).bearer(app.token);
        }
        let status = self.pick(&[1, 2, 3, 4]);
        let body = if self.chance(20) {
            json!({"task_id": id, "task_data": {"status": status}})
        } else {
            json!({"task_data": {"task_id": id, "status": status, "task_stage": "adv"}})
        };
        Hostile::v1(POST, "/v1/set_task").bearer(app.token).json(body.to_string())
    }

    /// Well-formed ids of tables that do not exist: positions past the
    /// type's last table, types never registered.
    pub(super) fn v1_missing_table(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let real = self.pick(&app.tasks);
        let (uuid, _) = real.split_once('_').unwrap();
        let kind = app.task_type.replace('_', "-");
        let random = 2 + self.rng.next() % 1_000_000_000;
        let pos: u64 = self.pick(&[2, 3, 99, 1_000_000, u64::from(u32::MAX), random]);
        let id = match self.below(4) {
            0 | 1 => format!("{uuid}_{kind}_{pos}"),
            2 => format!(
                "{uuid}_{}_1",
                self.pick(&["adv-nosuch", "ADV-ALPHA", "Adv-Beta", "t-schedule-cfg", "sqlite-master", "pg-class"])
            ),
            _ => format!("{}_adv-nosuch_{pos}", self.uuid()),
        };
        if self.chance(50) {
            return Hostile::v1(GET, format!("/v1/get_task?task_id={}", enc(&id))).bearer(app.token);
        }
        let body = json!({"task_data": {"task_id": id, "status": self.pick(&[1, 2, 3, 4]), "task_stage": "adv"}});
        Hostile::v1(POST, "/v1/set_task").bearer(app.token).json(body.to_string())
    }

    /// hold_tasks, get_task_list and get_task_counts_by_type with bad types, limits and statuses.
    pub(super) fn v1_hold_and_list(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let t = app.task_type;
        let bad_type = match self.below(4) {
            0 => self.pick(&INJECTIONS).to_string(),
            1 => self
                .pick(&["adv_nosuch", "ADV_ALPHA", "adv-alpha", "Adv_Beta", "ü", "t_schedule_cfg", "%", "*"])
                .to_string(),
            2 => "k".repeat(41 + self.below(10_000)),
            _ => String::new(),
        };
        let bad_limit = self.pick(&[
            "-1",
            "-9223372036854775808",
            "abc",
            "1.5",
            "1e3",
            "9223372036854775808",
            "0x10",
            "[]",
            "%00",
            "NaN",
            "-5",
            "1 0",
        ]);
        match self.below(7) {
            0 => Hostile::v1(POST, format!("/v1/hold_tasks?task_type={}&limit=10", enc(&bad_type))).bearer(app.token),
            1 => Hostile::v1(POST, format!("/v1/hold_tasks?task_type={t}&limit={}", enc(bad_limit))).bearer(app.token),
            2 => {
                let body = self.pick(&[
                    json!({"task_type": t, "limit": -5}),
                    json!({"task_type": t, "limit": 1.5}),
                    json!({"task_type": t, "limit": true}),
                    json!({"task_type": t, "limit": {}}),
                    json!({"task_type": t, "limit": []}),
                    json!({"task_type": [t]}),
                    json!({"task_type": {"name": t}}),
                    json!({"task_type": true}),
                    json!({"task_type": null}),
                    json!({"limit": 5}),
                    json!({"task_type": bad_type, "limit": 5}),
                    json!({"task_type": t, "limit": "x"}),
                    json!({"task_type": t, "limit": i64::MIN}),
                    json!([t, 5]),
                    json!({"taskType": t, "limit": -1}),
                ]);
                let ct = self.pick(&[Some("application/json"), None]);
                Hostile::v1(POST, "/v1/hold_tasks").bearer(app.token).raw(ct, body.to_string())
            }
            3 => {
                let q = self.pick(&[
                    format!("task_type={t}&status=5"),
                    format!("task_type={t}&status=-1"),
                    format!("task_type={t}&status=9999999999"),
                    format!("task_type={t}&status=abc"),
                    format!("task_type={t}&limit=-1"),
                    format!("task_type={t}&limit=x"),
                    format!("taskType={t}&status=7"),
                    format!("task_type={}&status=1", enc(&bad_type)),
                    "status=1".to_string(),
                    format!("task_type={t}&status=1.0"),
                    format!("task_type={t}&status=1&limit=9223372036854775808"),
                ]);
                Hostile::v1(GET, format!("/v1/get_task_list?{q}")).bearer(app.token)
            }
            4 => {
                Hostile::v1(GET, format!("/v1/get_task_counts_by_type?task_type={}", enc(&bad_type))).bearer(app.token)
            }
            5 => Hostile::v1(
                GET,
                format!(
                    "/v1/get_task_counts_by_type?{}",
                    self.pick(&["", "type=adv_alpha", "task_type=", "taskType="])
                ),
            )
            .bearer(app.token),
            _ => {
                // Raw bytes in the query string.
                let q = self.pick(&[
                    "task_type=%ff%fe&limit=1",
                    "task_type=%zz",
                    "task_type=adv%00alpha",
                    "task_type=adv_alpha%00&limit=1",
                    "task_type=%E2%80%AEadv",
                ]);
                Hostile::v1(POST, format!("/v1/hold_tasks?{q}")).bearer(app.token)
            }
        }
    }

    /// set_task changing the status of tasks that do not exist (in tables
    /// that do), and of real tasks with a status that does not exist.
    pub(super) fn v1_set_missing(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let kind = app.task_type.replace('_', "-");
        let real = self.pick(&app.tasks);
        let body = match self.below(3) {
            0 | 1 => {
                let id = format!("{}_{kind}_1", self.uuid());
                let len = 1 + self.below(64);
                let id = if self.chance(20) { format!("{}_{kind}_1", self.hex(len)) } else { id };
                let mut data = json!({"task_id": id, "status": self.pick(&[1, 2, 3, 4])});
                if self.chance(50) {
                    data["task_stage"] = json!("adv");
                    data["order_time"] = json!(4_102_444_800i64);
                    data["schedule_log"] = json!("{\"x\":1}");
                }
                json!({ "task_data": data })
            }
            _ => {
                let status = self.pick(&[5, 6, -1, -4, 99, i32::MAX, i32::MIN]);
                json!({"task_data": {"task_id": real, "status": status}})
            }
        };
        Hostile::v1(POST, "/v1/set_task").bearer(app.token).json(body.to_string())
    }

    /// register_task with cfg values out of range, type names that cannot
    /// be table names or clash with a registered one, and broken wrappers.
    pub(super) fn v1_register(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let fresh = format!("adv_new_{}", self.hex(8));
        let body = match self.below(4) {
            0 | 1 => {
                let mut cfg = Self::valid_cfg(&fresh);
                let (field, value) = self.pick(&[
                    ("schedule_limit", -1),
                    ("schedule_limit", 2_001),
                    ("schedule_limit", i64::MAX),
                    ("schedule_limit", i64::MIN),
                    ("schedule_interval", -1),
                    ("schedule_interval", 3_601),
                    ("max_processing_time", -5),
                    ("max_processing_time", 604_801),
                    ("max_retry_num", -1),
                    ("max_retry_num", 1_001),
                    ("retry_interval", 86_401),
                    ("retry_interval", -86_401),
                    ("retry_interval", i64::MIN),
                    ("max_retry_interval", -1),
                    ("max_retry_interval", 604_801),
                    ("max_retry_interval", i64::MAX),
                ]);
                cfg[field] = json!(value);
                if self.chance(30) {
                    // Its own registered type: re-configuring with a bad value is refused too.
                    cfg["task_type"] = json!(app.task_type);
                    let body = json!({ "task_config_data": cfg }).to_string();
                    return Hostile::v1(POST, "/v1/set_task_schedule_cfg").bearer(app.token).json(body);
                }
                json!({ "task_config_data": cfg })
            }
            2 => {
                let name = match self.below(3) {
                    0 => self.pick(&INJECTIONS).to_string(),
                    1 => self
                        .pick(&[
                            "",
                            "a-b",
                            "a b",
                            "é",
                            "adv.new",
                            "ADV_ALPHA",
                            "Adv_Beta",
                            "adv_alphA",
                            "ADV_BETA",
                            "\u{0}",
                        ])
                        .to_string(),
                    _ => "k".repeat(41 + self.below(100)),
                };
                let cfg = Self::valid_cfg(&name);
                self.pick(&[json!({ "task_config_data": cfg }), json!({ "task_type_data": cfg }), cfg])
            }
            _ => self.pick(&[
                json!({"task_config_data": "adv_new"}),
                json!({"task_type_data": [fresh]}),
                json!({"task_config_data": 5}),
                json!({"task_config_data": null, "task_type": fresh}),
                json!({"task_type_data": true}),
                json!({"task_config_data": {}}),
                json!({}),
                json!({"schedule_limit": 10}),
                json!({"task_type": null}),
            ]),
        };
        Hostile::v1(POST, "/v1/register_task").bearer(app.token).json(body.to_string())
    }

    /// Valid calls on another app's task type and tasks, with this app's
    /// token (or the admin's): 403.
    pub(super) fn v1_other_apps(&mut self) -> Hostile {
        let (me, other) = self.apps();
        let h = self.valid_v1_request(other);
        if self.chance(15) {
            h.bearer(ADMIN)
        } else {
            h.bearer(me.token)
        }
    }

    /// A `/v1` call on `app`'s type or tasks its own token may make.
    pub(super) fn valid_v1_request(&mut self, app: &App) -> Hostile {
        let task = self.pick(&app.tasks);
        let t = app.task_type;
        match self.below(8) {
            0 => Hostile::v1(POST, "/v1/create_task").json(self.valid_task(app).to_string()),
            1 => Hostile::v1(POST, format!("/v1/hold_tasks?task_type={t}&limit={}", self.pick(&[0, 1, 10, 2000]))),
            2 => Hostile::v1(POST, "/v1/hold_tasks").json(json!({"task_type": t, "limit": 1}).to_string()),
            3 => {
                let status = self.pick(&[1, 2, 3, 4]);
                let body = json!({"task_data": {"task_id": task, "status": status, "task_stage": "hijacked"}});
                Hostile::v1(POST, "/v1/set_task").json(body.to_string())
            }
            4 => Hostile::v1(GET, format!("/v1/get_task?{}={task}", self.pick(&["task_id", "taskId"]))),
            5 => Hostile::v1(GET, format!("/v1/get_task_list?task_type={t}&status={}&limit=10", self.pick(&[0, 1]))),
            6 => Hostile::v1(GET, format!("/v1/get_task_counts_by_type?task_type={t}")),
            _ => {
                let mut cfg = Self::valid_cfg(t);
                cfg["schedule_limit"] = json!(2_000);
                Hostile::v1(POST, "/v1/set_task_schedule_cfg").json(json!({ "task_config_data": cfg }).to_string())
            }
        }
    }
}

/// Fields of create_task's `task_data`, and the values (as JSON) it must refuse.
pub(super) const CREATE_TASK_MUTATIONS: [(&str, &str); 13] = [
    ("task_type", r#"[5, [], {}, null, true]"#),
    ("user_id", "[5]"),
    ("task_stage", r#"[[], {}]"#),
    ("status", r#"["1", 1.5, 9223372036854775807]"#),
    ("priority", r#"["5", 1.5, 18446744073709551615, 9223372036854775807, -9223372036854775808, -100000000000]"#),
    ("crt_retry_num", r#"["x"]"#),
    ("max_retry_num", "[18446744073709551615]"),
    ("order_time", r#"["now", 1.5]"#),
    ("context", r#"[{}, [1], 5]"#),
    ("schedule_log", "[{}]"),
    ("create_time", "[5]"),
    ("modify_time", "[[]]"),
    ("task_id", "[7]"),
];

/// Fields of set_task's `task_data` (on a real task), and the values (as JSON) it must refuse.
pub(super) const SET_TASK_MUTATIONS: [(&str, &str); 11] = [
    ("task_id", r#"[5, [], null]"#),
    ("status", r#"["3", 5, -1, 9, 9223372036854775807, 2.5]"#),
    ("priority", r#"["x", -9223372036854775808, 100000000000]"#),
    ("crt_retry_num", "[9223372036854775807, -100000000000]"),
    ("max_retry_num", "[-9223372036854775808]"),
    ("max_retry_interval", "[9223372036854775807]"),
    ("user_id", r#"[["u"]]"#),
    ("task_stage", "[7]"),
    ("context", r#"[{"a": 1}]"#),
    ("schedule_log", "[[]]"),
    ("order_time", r#"["later", 18446744073709551615]"#),
];

/// Fields of a task type's cfg, and the values (as JSON) register_task must
/// refuse (strings are the right type for `task_type` and `create_time`).
pub(super) const REGISTER_TASK_MUTATIONS: [(&str, &str); 8] = [
    ("schedule_limit", r#"["10", 1.5, [], {}, true, null, 18446744073709551615]"#),
    ("schedule_interval", r#"["10", 1.5, [], {}, true, null, 18446744073709551615]"#),
    ("max_processing_time", r#"["10", 1.5, [], {}, true, null, 18446744073709551615]"#),
    ("max_retry_num", r#"["10", 1.5, [], {}, true, null, 18446744073709551615]"#),
    ("retry_interval", r#"["10", 1.5, [], {}, true, null, 18446744073709551615]"#),
    ("max_retry_interval", r#"["10", 1.5, [], {}, true, null, 18446744073709551615]"#),
    ("task_type", r#"[1.5, [], {}, true, 18446744073709551615]"#),
    ("create_time", r#"[1.5, [], {}, true, 18446744073709551615]"#),
];

/// `(field, value)` pairs from a table of fields and the values (a JSON
/// array) each must refuse.
pub(super) fn pairs(table: &[(&'static str, &str)]) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    for (field, values) in table {
        let values: Vec<Value> = serde_json::from_str(values).unwrap_or_else(|e| panic!("{field}: {e}"));
        out.extend(values.into_iter().map(|v| (*field, v)));
    }
    out
}
