//! [`Tasks`]: the `/v1` operations with their semantics (API.md): input
//! checks, the type's cfg and positions, order_time on create, the hold
//! limit, set_task's "zero means unchanged". Creates are written in batches
//! by a [`CreateBatcher`], so many concurrent creates share a transaction.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use xtimer_core::batch::Gather;
use xtimer_core::config::AsyncflowConfig;
use xtimer_core::{SharedClock, TtlCache};

use crate::holds::{Claim, HoldCombiner};
use crate::retry::{order_time_ready, MAX_PRIORITY};
use crate::task_id::{check_task_type, TaskId};
use crate::wire::{TaskData, TaskScheduleCfg, TaskStatus};
use crate::{Error, Result};
use xtimer_store::tasks::{Positions, Registration, SetOutcome, TaskStore, TypeRow};

/// Most tasks one hold returns, whatever it asks for.
pub const MAX_HOLD: u32 = 2_000;
/// Tasks get_task_list returns when asked for 0.
pub const DEFAULT_LIST: u32 = 100;
/// How long a type's cfg and positions are reused before being read again.
/// Another node's register or roll is seen within this.
const CACHE_TTL: Duration = Duration::from_secs(1);
/// Most task types whose cfg (and, apart, positions) are cached; past it
/// the oldest is read again at its next use.
pub const CACHED_TYPES: usize = 10_000;
/// How long the create writer waits for more creates before a write.
const CREATE_LINGER: Duration = Duration::from_millis(2);
pub use xtimer_core::task::{MAX_LONG_TEXT, MAX_SHORT_TEXT};

/// A create waiting for its batch.
struct PendingCreate {
    task: TaskData,
    pos: u32,
    done: oneshot::Sender<Result<()>>,
}

/// The task engine's operations, shared by every handler. Cheap to clone.
#[derive(Clone)]
pub struct Tasks {
    store: TaskStore,
    clock: SharedClock,
    creates: mpsc::Sender<PendingCreate>,
    /// Each type's cfg as last read (`None`: not registered).
    cfgs: Arc<TtlCache<String, Option<TypeRow>>>,
    /// Each type's table positions as last read (`None`: not registered).
    positions: Arc<TtlCache<String, Option<Positions>>>,
    holds: HoldCombiner,
}

impl Tasks {
    /// The engine over `store`, and the batcher that writes its creates
    /// (run it with [`CreateBatcher::run`]).
    pub fn new(store: TaskStore, clock: SharedClock, config: &AsyncflowConfig) -> (Self, CreateBatcher) {
        let (tx, rx) = mpsc::channel(config.create_batch_size * 4);
        let batcher = CreateBatcher {
            store: store.clone(),
            clock: clock.clone(),
            inbox: Gather::new(rx, config.create_batch_size, CREATE_LINGER),
        };
        let tasks = Self {
            store,
            cfgs: Arc::new(TtlCache::new(CACHED_TYPES, CACHE_TTL, clock.clone())),
            positions: Arc::new(TtlCache::new(CACHED_TYPES, CACHE_TTL, clock.clone())),
            clock,
            creates: tx,
            holds: HoldCombiner::default(),
        };
        (tasks, batcher)
    }

    /// The store underneath, for governance and tools.
    pub fn store(&self) -> &TaskStore {
        &self.store
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    async fn cached_cfg(&self, task_type: &str) -> Result<Option<TypeRow>> {
        if let Some(value) = self.cfgs.get(task_type) {
            return Ok(value);
        }
        let value = self.store.cfg(task_type).await?;
        self.cfgs.insert(task_type.into(), value.clone());
        Ok(value)
    }

    async fn cached_positions(&self, task_type: &str) -> Result<Option<Positions>> {
        if let Some(value) = self.positions.get(task_type) {
            return Ok(value);
        }
        let value = self.store.positions(task_type).await?;
        self.positions.insert(task_type.into(), value);
        Ok(value)
    }

    /// The cfg of a registered type.
    async fn cfg_of(&self, task_type: &str) -> Result<TaskScheduleCfg> {
        Ok(self.type_of(task_type).await?.cfg)
    }

    async fn type_of(&self, task_type: &str) -> Result<TypeRow> {
        check_task_type(task_type)?;
        self.cached_cfg(task_type).await?.ok_or_else(|| Error::UnknownType(task_type.into()))
    }

    /// The app that owns a registered type (`None`: open to every app).
    pub async fn owner_of(&self, task_type: &str) -> Result<Option<String>> {
        Ok(self.type_of(task_type).await?.owner)
    }

    /// The positions of a registered type.
    async fn positions_of(&self, task_type: &str) -> Result<Positions> {
        check_task_type(task_type)?;
        self.cached_positions(task_type).await?.ok_or_else(|| Error::UnknownType(task_type.into()))
    }

    /// Forgets what is cached of a type (after this node changed it).
    pub fn forget(&self, task_type: &str) {
        self.cfgs.invalidate(task_type);
        self.positions.invalidate(task_type);
    }

    /// register_task: creates a type; fields left at zero get defaults. It
    /// is owned by `owner`. A type that exists is left as it is
    /// ([`Error::TypeExists`]): its cfg changes only through [`set_cfg`](Self::set_cfg).
    pub async fn register(&self, cfg: TaskScheduleCfg, owner: Option<&str>) -> Result<()> {
        check_task_type(&cfg.task_type)?;
        let cfg = cfg.with_defaults();
        check_cfg(&cfg)?;
        match self.store.register(&cfg, owner, self.now_ms()).await? {
            Registration::Registered(_) => {}
            Registration::Exists => return Err(Error::TypeExists(cfg.task_type)),
            Registration::CaseClash { existing } => return Err(Error::TypeClash(cfg.task_type, existing)),
        }
        self.forget(&cfg.task_type);
        Ok(())
    }

    /// set_task_schedule_cfg: changes the cfg of a registered type. Fields
    /// left at zero (`fair_by_user`: left out) keep their value, so a
    /// caller may send only what it changes; the result is checked like a
    /// registered cfg and returned.
    /// A type owned by an app may be changed only by `caller` `None` (auth
    /// off, or the route checked already) or that app.
    pub async fn set_cfg(&self, change: TaskScheduleCfg, caller: Option<&str>) -> Result<TaskScheduleCfg> {
        check_task_type(&change.task_type)?;
        let current = self.store.cfg(&change.task_type).await?;
        let TypeRow { mut cfg, owner } = current.ok_or_else(|| Error::UnknownType(change.task_type.clone()))?;
        if let (Some(owner), Some(caller)) = (owner.as_deref(), caller) {
            if owner != caller {
                return Err(Error::NotOwner(change.task_type));
            }
        }
        let or = |new: i64, old: i64| if new == 0 { old } else { new };
        cfg.schedule_limit = or(change.schedule_limit, cfg.schedule_limit);
        cfg.schedule_interval = or(change.schedule_interval, cfg.schedule_interval);
        cfg.max_processing_time = or(change.max_processing_time, cfg.max_processing_time);
        cfg.max_retry_num = or(change.max_retry_num, cfg.max_retry_num);
        cfg.retry_interval = or(change.retry_interval, cfg.retry_interval);
        cfg.max_retry_interval = or(change.max_retry_interval, cfg.max_retry_interval);
        cfg.fair_by_user = change.fair_by_user.or(cfg.fair_by_user);
        check_cfg(&cfg)?;
        if !self.store.set_cfg(&cfg, self.now_ms()).await? {
            return Err(Error::UnknownType(cfg.task_type));
        }
        self.forget(&cfg.task_type);
        let row = self.store.cfg(&cfg.task_type).await?;
        Ok(row.ok_or_else(|| Error::UnknownType(cfg.task_type.clone()))?.cfg)
    }

    /// get_task_schedule_cfg_list, with each type's owner.
    pub async fn cfgs(&self) -> Result<Vec<TypeRow>> {
        Ok(self.store.cfgs().await?)
    }

    /// create_task: a pending task of a registered type, in the type's
    /// newest table; returns its id.
    pub async fn create(&self, task: TaskData) -> Result<String> {
        self.create_with_uuid(task, None).await
    }

    /// create_task with a caller-chosen uuid part: creating the same uuid
    /// twice (in the same table) stores one task. Timers use it so that
    /// each fire creates one task however often it is retried.
    pub async fn create_with_uuid(&self, mut task: TaskData, uuid: Option<String>) -> Result<String> {
        let cfg = self.cfg_of(&task.task_type).await?;
        let positions = match &uuid {
            // Fresh, not cached: another node may have rolled the type
            // since an earlier attempt at this task.
            Some(_) => self
                .store
                .positions(&task.task_type)
                .await?
                .ok_or_else(|| Error::UnknownType(task.task_type.clone()))?,
            None => self.positions_of(&task.task_type).await?,
        };
        let pos = positions.end;
        check_texts(&task)?;
        check_priority(task.priority)?;
        let mut id = TaskId::generate(&task.task_type, pos);
        if let Some(uuid) = uuid {
            id.uuid = uuid;
            // The newest table dedupes on insert; an older one (the type
            // rolled since the first create) is asked here.
            for p in positions.begin..pos {
                let older = TaskId { pos: p, ..id.clone() }.to_string();
                if self.store.get(&task.task_type, p, &older).await?.is_some() {
                    return Ok(older);
                }
            }
        }
        task.task_id = id.to_string();
        task.status = TaskStatus::Pending.code();
        task.crt_retry_num = 0;
        task.max_retry_num = cfg.max_retry_num;
        task.max_retry_interval = cfg.retry_interval;
        task.order_time = order_time_ready(self.now_ms().div_euclid(1_000), task.priority);
        let (done, wait) = oneshot::channel();
        let task_id = task.task_id.clone();
        self.creates.send(PendingCreate { task, pos, done }).await.map_err(|_| Error::ShuttingDown)?;
        wait.await.map_err(|_| Error::ShuttingDown)??;
        Ok(task_id)
    }

    /// hold_tasks: claims up to `limit` due tasks (0: the type's
    /// schedule_limit; at most [`MAX_HOLD`]), oldest first, or round-robin
    /// across user_ids for a type whose cfg sets `fair_by_user`.
    pub async fn hold(&self, task_type: &str, limit: i64) -> Result<Vec<TaskData>> {
        let cfg = self.cfg_of(task_type).await?;
        if limit < 0 {
            return Err(Error::Invalid(format!("limit must be 0 (the type's schedule_limit) or more, not {limit}")));
        }
        let limit = if limit == 0 { cfg.schedule_limit } else { limit };
        let limit = limit.clamp(1, i64::from(MAX_HOLD)) as u32;
        let pos = self.positions_of(task_type).await?;
        let claim = TypeClaim {
            store: self.store.clone(),
            clock: self.clock.clone(),
            task_type: task_type.into(),
            pos,
            fair_by_user: cfg.fair_by_user.unwrap_or(false),
        };
        self.holds.hold(task_type, limit, Arc::new(claim)).await
    }

    /// set_task: takes the worker's non-zero fields; a final task is left alone.
    pub async fn set(&self, update: TaskData) -> Result<()> {
        if update.task_id.is_empty() {
            return Err(Error::Invalid("task_data.task_id is required".into()));
        }
        let id = TaskId::parse(&update.task_id)?;
        if update.status != 0 && TaskStatus::from_code(update.status).is_none() {
            return Err(Error::Invalid(format!("status must be 1, 2, 3 or 4, not {}", update.status)));
        }
        check_texts(&update)?;
        check_priority(update.priority)?;
        for (name, v) in [
            ("crt_retry_num", update.crt_retry_num),
            ("max_retry_num", update.max_retry_num),
            ("max_retry_interval", update.max_retry_interval),
        ] {
            if v.unsigned_abs() > MAX_PRIORITY.unsigned_abs() {
                return Err(Error::Invalid(format!("{name} is out of range: {v}")));
            }
        }
        self.locate(&id).await?;
        match self.store.set(&id.task_type, id.pos, &update, self.now_ms()).await? {
            SetOutcome::Updated | SetOutcome::AlreadyFinal => Ok(()),
            SetOutcome::Missing => Err(Error::TaskNotFound(update.task_id)),
        }
    }

    /// get_task: one task, found from its id alone.
    pub async fn get(&self, task_id: &str) -> Result<TaskData> {
        if task_id.is_empty() {
            return Err(Error::Invalid("task_id is required".into()));
        }
        let id = TaskId::parse(task_id)?;
        self.locate(&id).await?;
        match self.store.get(&id.task_type, id.pos, task_id).await? {
            Some(t) => Ok(t.data),
            None => Err(Error::TaskNotFound(task_id.into())),
        }
    }

    /// Checks that `id` names a table that exists: a registered type and a
    /// position not past its end. An id that does not is "not found".
    async fn locate(&self, id: &TaskId) -> Result<()> {
        let known = match self.cached_positions(&id.task_type).await? {
            Some(pos) if id.pos <= pos.end => true,
            // The cache may predate a roll: ask the database.
            Some(_) => self.store.positions(&id.task_type).await?.is_some_and(|p| id.pos <= p.end),
            None => false,
        };
        if known {
            Ok(())
        } else {
            Err(Error::TaskNotFound(id.to_string()))
        }
    }

    /// get_task_list: tasks of a type with a status (0: any) whose
    /// order_time has come, oldest order_time first (as the reference does).
    pub async fn list(&self, task_type: &str, status: i32, limit: i64) -> Result<Vec<TaskData>> {
        if task_type.is_empty() {
            return Err(Error::Invalid("task_type is required".into()));
        }
        let pos = self.positions_of(task_type).await?;
        let status = match status {
            0 => None,
            s if TaskStatus::from_code(s).is_some() => Some(s),
            s => return Err(Error::Invalid(format!("status must be 0 (any), 1, 2, 3 or 4, not {s}"))),
        };
        if limit < 0 {
            return Err(Error::Invalid(format!("limit must be 0 or more, not {limit}")));
        }
        let limit = if limit == 0 { DEFAULT_LIST } else { limit.min(i64::from(MAX_HOLD)) as u32 };
        let now_s = self.now_ms().div_euclid(1_000);
        Ok(self.store.list(task_type, Positions { begin: 1, end: pos.end }, status, now_s, limit).await?)
    }

    /// get_task_counts_by_type: every task of the type, in every table.
    pub async fn count(&self, task_type: &str) -> Result<i64> {
        if task_type.is_empty() {
            return Err(Error::Invalid("task_type is required".into()));
        }
        let pos = self.store.positions(task_type).await?.ok_or_else(|| Error::UnknownType(task_type.into()))?;
        Ok(self.store.count(task_type, pos.end).await?)
    }

    /// Every task of the type, in every table, by status code.
    pub async fn count_by_status(&self, task_type: &str) -> Result<Vec<(i64, i64)>> {
        let pos = self.store.positions(task_type).await?.ok_or_else(|| Error::UnknownType(task_type.into()))?;
        Ok(self.store.count_by_status(task_type, pos.end).await?)
    }
}

/// A combined hold's claim on one type's tables.
struct TypeClaim {
    store: TaskStore,
    clock: SharedClock,
    task_type: String,
    pos: Positions,
    /// The type's `fair_by_user`: round-robin across user_ids.
    fair_by_user: bool,
}

#[async_trait]
impl Claim for TypeClaim {
    async fn claim(&self, total: u32) -> Result<Vec<TaskData>> {
        let now = self.clock.now_ms();
        Ok(if self.fair_by_user {
            self.store.hold_fair_by_user(&self.task_type, self.pos, total, now).await?
        } else {
            self.store.hold(&self.task_type, self.pos, total, now).await?
        })
    }

    async fn give_back(&self, tasks: Vec<TaskData>) {
        let now = self.clock.now_ms();
        for mut task in tasks {
            task.status = TaskStatus::Pending.code();
            let given: Result<()> = match TaskId::parse(&task.task_id) {
                Ok(id) => self.store.set(&id.task_type, id.pos, &task, now).await.map(|_| ()).map_err(Error::from),
                Err(err) => Err(err.into()),
            };
            if let Err(err) = given {
                // Not lost: the governor takes it back after max_processing_time.
                tracing::warn!(task_id = %task.task_id, error = %err, "Giving back a held task failed.");
            }
        }
    }
}

fn check_cfg(cfg: &TaskScheduleCfg) -> Result<()> {
    let ranges: [(&str, i64, i64, i64); 6] = [
        ("schedule_limit", cfg.schedule_limit, 1, i64::from(MAX_HOLD)),
        ("schedule_interval", cfg.schedule_interval, 1, 3_600),
        ("max_processing_time", cfg.max_processing_time, 1, 7 * 86_400),
        ("max_retry_num", cfg.max_retry_num, 0, 1_000),
        ("retry_interval", cfg.retry_interval, -86_400, 86_400),
        ("max_retry_interval", cfg.max_retry_interval, 1, 7 * 86_400),
    ];
    for (name, v, lo, hi) in ranges {
        if v < lo || v > hi {
            return Err(Error::Invalid(format!("{name} must be {lo} to {hi}, not {v}")));
        }
    }
    Ok(())
}

fn check_texts(task: &TaskData) -> Result<()> {
    for (name, v, max) in [
        ("user_id", &task.user_id, MAX_SHORT_TEXT),
        ("task_stage", &task.task_stage, MAX_SHORT_TEXT),
        ("context", &task.context, MAX_LONG_TEXT),
        ("schedule_log", &task.schedule_log, MAX_LONG_TEXT),
    ] {
        if v.len() > max {
            return Err(Error::Invalid(format!("{name} is {} bytes; the limit is {max}", v.len())));
        }
        // PostgreSQL refuses NUL in text, and would fail the whole batch with it.
        if v.contains('\0') {
            return Err(Error::Invalid(format!("{name} must not contain NUL characters")));
        }
    }
    Ok(())
}

fn check_priority(priority: Option<i64>) -> Result<()> {
    match priority {
        Some(p) if p.unsigned_abs() > MAX_PRIORITY.unsigned_abs() => {
            Err(Error::Invalid(format!("priority must be within ±{MAX_PRIORITY} seconds, not {p}")))
        }
        _ => Ok(()),
    }
}

/// Writes creates in batches: whatever is queued when it is free goes in
/// one transaction per table, up to `create_batch_size` tasks.
pub struct CreateBatcher {
    store: TaskStore,
    clock: SharedClock,
    inbox: Gather<PendingCreate>,
}

impl CreateBatcher {
    /// Writes until `shutdown`, then writes what is queued and stops.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<()> {
        let mut batch = Vec::new();
        // Concurrent creates within the linger go in one transaction.
        while self.inbox.next_until(&mut batch, &shutdown).await {
            self.write(std::mem::take(&mut batch)).await;
        }
        self.inbox.close();
        while self.inbox.next(&mut batch).await {
            self.write(std::mem::take(&mut batch)).await;
        }
        Ok(())
    }

    async fn write(&self, batch: Vec<PendingCreate>) {
        let mut groups: HashMap<(String, u32), Vec<PendingCreate>> = HashMap::new();
        for p in batch {
            groups.entry((p.task.task_type.clone(), p.pos)).or_default().push(p);
        }
        let now = self.clock.now_ms();
        for ((task_type, pos), group) in groups {
            let tasks: Vec<TaskData> = group.iter().map(|p| p.task.clone()).collect();
            let started = std::time::Instant::now();
            let result = self.store.insert(&task_type, pos, &tasks, now).await;
            tracing::debug!(
                tasks = tasks.len(),
                elapsed_us = started.elapsed().as_micros() as u64,
                "Wrote created tasks."
            );
            if let Err(err) = &result {
                tracing::error!(task_type, pos, tasks = tasks.len(), error = %err, "Writing created tasks failed.");
            }
            let result = result.map_err(|err| Arc::new(Error::Store(err)));
            for p in group {
                let _ = p.done.send(result.clone().map_err(Error::WriteFailed));
            }
        }
    }
}
