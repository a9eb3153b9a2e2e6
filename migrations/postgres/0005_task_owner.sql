-- asyncflow: the app that registered a task type (NULL: registered with
-- auth off, open to every app). With auth on, only the owner's token may
-- use an owned type.
ALTER TABLE t_schedule_cfg ADD COLUMN owner_app TEXT;
