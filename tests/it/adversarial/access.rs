//! Requests for what the caller may not reach: unknown ids, other apps'
//! ids, bad tokens and admin calls.

use super::*;

impl Gen<'_> {
    /// Ids no timer has, and the app's deleted timer for the routes that change one.
    pub(super) fn unknown_id(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let (method, route) = self.pick(&TIMER_ROUTES);
        let changes = matches!(route, "enableTimer" | "unableTimer" | "delTimer");
        let id = if changes && self.chance(25) { app.deleted } else { self.unknown_timer_id() };
        let prefix = self.prefix();
        if route == "delTimer" && self.chance(40) {
            let body = json!({"id": id, "app": app.name}).to_string();
            let ct = self.pick(&[Some("application/json"), None]);
            return Hostile::timer(method, format!("{prefix}/delTimer")).bearer(app.token).raw(ct, body);
        }
        Hostile::timer(method, format!("{prefix}/{route}?id={id}&app={}", app.name)).bearer(app.token)
    }

    /// Another app's timers, app name and listing with this app's token.
    pub(super) fn other_apps_id(&mut self) -> Hostile {
        let (me, other) = self.apps();
        let prefix = self.prefix();
        let (method, route) = self.pick(&TIMER_ROUTES);
        let theirs = if self.chance(80) { self.pick(&other.timers) } else { other.deleted };
        let (id, app) = match self.below(5) {
            0 => (theirs, me.name),
            1 => (theirs, other.name),
            2 => (self.pick(&me.timers), other.name),
            3 => {
                let path = format!("{prefix}/getAppTimers?app={}&pageIndex=1&pageSize=20", other.name);
                return Hostile::timer(GET, path).bearer(me.token);
            }
            _ => {
                let body = self.valid_timer(other);
                return self.create(me, &body);
            }
        };
        if route == "delTimer" && self.chance(40) {
            let body = json!({"id": id, "app": app}).to_string();
            return Hostile::timer(method, format!("{prefix}/delTimer")).bearer(me.token).json(body);
        }
        Hostile::timer(method, format!("{prefix}/{route}?id={id}&app={app}")).bearer(me.token)
    }

    /// Valid requests on every route, with a missing, garbage, admin or other app's token.
    pub(super) fn bad_token(&mut self) -> Hostile {
        let (me, other) = self.apps();
        let h = self.valid_request(me);
        let v1 = h.expect == Expect::Asyncflow;
        let mut h = Hostile { auth: Vec::new(), ..h };
        // A token of another app only fails where an app is named (the timer
        // API); on `/v1` it fails on another app's type (see `v1_other_apps`).
        // `nodes` takes any valid token.
        let kinds = if v1 || h.path.ends_with("/nodes") { 12 } else { 14 };
        match self.below(kinds) {
            0 => {}
            1 => h = h.authorization(HeaderValue::from_static("Bearer")),
            2 => h = h.bearer(&format!("garbage-{}", self.hex(16))),
            3 => h = h.bearer(&me.token[..me.token.len() - 1]),
            4 => h = h.bearer(&format!("{}x", me.token)),
            5 => h = h.authorization(HeaderValue::from_str(&format!("Basic {}", me.token)).unwrap()),
            6 => h = h.authorization(HeaderValue::from_str(&format!("Token {}", me.token)).unwrap()),
            7 => h = h.authorization(HeaderValue::from_str(me.token).unwrap()),
            8 => h = h.authorization(HeaderValue::from_str(&format!("Bearer\t{}", me.token)).unwrap()),
            9 => h = h.authorization(HeaderValue::from_bytes(b"Bearer \xff\xfe\x80adv").unwrap()),
            10 => h = h.bearer(&"t".repeat(4_096 + self.below(4_000))),
            11 => h = h.bearer(&format!("{}, Bearer {}", me.token, me.token)),
            12 => h = h.bearer(other.token),
            _ => h = h.bearer(ADMIN),
        }
        if self.chance(10) {
            // Two headers: the first one counts, and it is garbage.
            h.auth.insert(0, HeaderValue::from_static("Bearer not-a-token"));
        }
        h
    }

    /// A request `app`'s token would be allowed to make (used only without that token).
    pub(super) fn valid_request(&mut self, app: &App) -> Hostile {
        let prefix = self.prefix();
        let id = self.pick(&app.timers);
        let a = app.name;
        match self.below(16) {
            0 => {
                let body = self.valid_timer(app);
                self.create(app, &body)
            }
            1 => Hostile::timer(GET, format!("{prefix}/enableTimer?id={id}&app={a}")),
            2 => Hostile::timer(GET, format!("{prefix}/unableTimer?id={id}&app={a}")),
            3 => Hostile::timer(DELETE, format!("{prefix}/delTimer?id={id}&app={a}")),
            4 => Hostile::timer(GET, format!("{prefix}/getTimer?id={id}&app={a}")),
            5 => Hostile::timer(GET, format!("{prefix}/getAppTimers?app={a}")),
            6 => Hostile::timer(GET, format!("{prefix}/getTimerTasks?id={id}&app={a}")),
            7 => Hostile::timer(GET, format!("{prefix}/nodes")),
            8 => Hostile::v1(POST, "/v1/create_task").json(self.valid_task(app).to_string()),
            9 => Hostile::v1(POST, format!("/v1/hold_tasks?task_type={}&limit=10", app.task_type)),
            10 => {
                let task = self.pick(&app.tasks);
                Hostile::v1(POST, "/v1/set_task").json(json!({"task_data": {"task_id": task, "status": 3}}).to_string())
            }
            11 => Hostile::v1(GET, format!("/v1/get_task?task_id={}", self.pick(&app.tasks))),
            12 => Hostile::v1(GET, format!("/v1/get_task_list?task_type={}&status=1&limit=10", app.task_type)),
            13 => Hostile::v1(GET, "/v1/get_task_schedule_cfg_list"),
            14 => Hostile::v1(GET, format!("/v1/get_task_counts_by_type?task_type={}", app.task_type)),
            _ => {
                let cfg = Self::valid_cfg(&format!("adv_new_{}", self.hex(6)));
                Hostile::v1(POST, "/v1/register_task").json(json!({ "task_config_data": cfg }).to_string())
            }
        }
    }

    /// issueToken without the admin token, and with it but a bad body.
    pub(super) fn admin(&mut self) -> Hostile {
        let (me, _) = self.apps();
        let path = format!("{}/admin/issueToken", self.prefix());
        let valid = json!({"app": self.pick(&["alpha", "beta", "gamma"])}).to_string();
        match self.below(3) {
            0 => {
                let h = Hostile::timer(POST, path).json(valid);
                match self.below(7) {
                    0 => h,
                    1 => h.bearer(me.token),
                    2 => h.bearer(&ADMIN[..ADMIN.len() - 1]),
                    3 => h.bearer(&ADMIN.to_uppercase()),
                    4 => h.bearer(&format!("{ADMIN}{ADMIN}")),
                    5 => h.authorization(HeaderValue::from_str(&format!("Basic {ADMIN}")).unwrap()),
                    _ => h.bearer(&format!("adv-{}", self.hex(20))),
                }
            }
            1 => {
                let body = self.pick(&[
                    json!({"app": ""}),
                    json!({"app": "a".repeat(129)}),
                    json!({"app": 5}),
                    json!({"app": null}),
                    json!({}),
                    json!({"app": "alpha", "extra": 1}),
                    json!({"app": ["alpha"]}),
                    json!({"App": "alpha"}),
                    json!({"app": {"name": "alpha"}}),
                    json!({"app": true}),
                ]);
                Hostile::timer(POST, path).bearer(ADMIN).json(body.to_string())
            }
            _ => {
                let ct = self.pick(&[None, Some("text/plain"), Some("application/x-www-form-urlencoded")]);
                let body = self.pick(&[valid.as_str(), "app=alpha", "", "[\"alpha\"]", "\"alpha\""]).to_string();
                Hostile::timer(POST, path).bearer(ADMIN).raw(ct, body)
            }
        }
    }
}
