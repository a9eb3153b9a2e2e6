-- An app's calendars (API 1d), by name: what a timer's excludeCalendars
-- leaves out. `spec` is the calendar as the app put it, as JSON (dates,
-- ranges, weekdays and the iCalendar text, kept as given); each node
-- compiles it for its queries. A put replaces the spec and keeps
-- create_time. Mirrors migrations/postgres/0014.
CREATE TABLE IF NOT EXISTS t_calendar (
    app         VARCHAR(128) NOT NULL,
    name        VARCHAR(256) NOT NULL,
    spec        LONGTEXT     NOT NULL,  -- JSON (xtimer_core::calendar::CalendarSpec)
    create_time BIGINT       NOT NULL,  -- Unix ms of the first put
    modify_time BIGINT       NOT NULL,  -- Unix ms of the last put
    PRIMARY KEY (app, name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
