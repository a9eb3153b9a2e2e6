//! Wrong methods and paths no route has.

use super::*;

impl Gen<'_> {
    /// Wrong methods on every route, and paths no route has. The fallbacks
    /// answer the timer API's envelope (404, 405), under `/v1` too: API.md
    /// has no asyncflow code for a call that does not exist, and a Go
    /// worker reads the envelope's non-zero `code` as an error all the same.
    pub(super) fn wrong_route(&mut self) -> Hostile {
        let (me, _) = self.apps();
        let prefix = self.prefix();
        let other_methods = ["PUT", "PATCH", "OPTIONS", "TRACE", "FOO", "POST", "DELETE", "GET"];
        let id = self.pick(&me.timers);
        let (path, allowed) = match self.below(3) {
            0 => {
                let (method, route) = self.pick(&TIMER_ROUTES);
                (format!("{prefix}/{route}?id={id}&app={}", me.name), vec![method])
            }
            1 => {
                let (path, method) = self.pick(&[
                    (format!("{prefix}/createTimer"), POST),
                    (format!("{prefix}/getAppTimers?app={}", me.name), GET),
                    (format!("{prefix}/admin/issueToken"), POST),
                    (format!("{prefix}/nodes"), GET),
                    ("/healthz".to_string(), GET),
                ]);
                (path, vec![method])
            }
            _ => {
                let (path, method) = self.pick(&[
                    ("/v1/create_task", POST),
                    ("/v1/hold_tasks", POST),
                    ("/v1/set_task", POST),
                    ("/v1/get_task", GET),
                    ("/v1/get_task_list", GET),
                    ("/v1/get_task_schedule_cfg_list", GET),
                    ("/v1/get_task_counts_by_type", GET),
                    ("/v1/register_task", POST),
                    ("/v1/set_task_schedule_cfg", POST),
                    ("/v1/ping", GET),
                ]);
                (path.to_string(), vec![method])
            }
        };
        if self.chance(30) {
            // A path no route has.
            let path = self.pick(&[
                format!("{prefix}/createTimers"),
                format!("{prefix}/"),
                format!("{prefix}/getTimer/{id}"),
                format!("{prefix}/admin/issueTokens"),
                format!("{prefix}/admin/"),
                "/api/xtimer/v1/create_task".to_string(),
                "/v1/".to_string(),
                "/v1/create_task/".to_string(),
                "/V1/create_task".to_string(),
                "/v2/create_task".to_string(),
                "/v1/drop_table".to_string(),
                "/v1/create_task%00".to_string(),
                "/v1/hold_tasks%2F..%2Fregister_task".to_string(),
                "/api/xtimer/createTimer%20".to_string(),
                "/%2e%2e/etc/passwd".to_string(),
                format!("/{}", "a".repeat(4_000)),
                "/api/XTIMER/createTimer".to_string(),
            ]);
            let method = self.pick(&[GET, POST, DELETE]);
            let body = self.valid_timer(me).to_string();
            return Hostile::timer(method, path).bearer(me.token).json(body);
        }
        let method = loop {
            let m = Method::from_bytes(self.pick(&other_methods).as_bytes()).unwrap();
            // axum answers HEAD on GET routes as GET does; it is not a wrong method.
            if !allowed.contains(&m) {
                break m;
            }
        };
        Hostile::timer(method, path).bearer(me.token).json(self.valid_task(me).to_string())
    }
}
