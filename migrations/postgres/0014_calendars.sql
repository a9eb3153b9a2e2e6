-- An app's calendars (API 1d), by name: what a timer's excludeCalendars
-- leaves out. `spec` is the calendar as the app put it, as JSON (dates,
-- ranges, weekdays and the iCalendar text, kept as given); each node
-- compiles it for its queries. A put replaces the spec and keeps
-- create_time. Mirrors migrations/sqlite/0013.
CREATE TABLE IF NOT EXISTS t_calendar (
    app         TEXT   NOT NULL,
    name        TEXT   NOT NULL,
    spec        TEXT   NOT NULL,  -- JSON (xtimer_core::calendar::CalendarSpec)
    create_time BIGINT NOT NULL,  -- Unix ms of the first put
    modify_time BIGINT NOT NULL,  -- Unix ms of the last put
    PRIMARY KEY (app, name)
);
